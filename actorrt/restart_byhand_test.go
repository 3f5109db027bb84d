package actorrt_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// TestRestartByHandRestartsFailedOnly: Restart on a mesh, or a slice, in
// which one member failed restarts that member and leaves the running
// ones as they are (same instances); with no failed member left, it is
// ErrNotFailed.
func TestRestartByHandRestartsFailedOnly(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 3}})
	m, err := actorrt.Init1((*Phoenix).Init).Spawn(ctx, procs, "phoenix-byhand", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := nonces(t, m)
	if err := actorrt.VoidMethod((*Phoenix).Panic).Broadcast(m.At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	if f := waitFailure(t, "phoenix-byhand"); f.Base != 1 {
		t.Fatalf("failure of member %d, want 1: %v", f.Base, f)
	}
	if err := m.Slice("gpus", 0, 2).Restart(ctx); err != nil {
		t.Fatalf("restart of a slice with one failed member: %v", err)
	}
	after := nonces(t, m)
	if after[0] != before[0] || after[2] != before[2] || after[1] == before[1] {
		t.Fatalf("nonces %v then %v: want members 0 and 2 the same instances, member 1 a new one", before, after)
	}
	if err := m.Restart(ctx); !errors.Is(err, actorrt.ErrNotFailed) {
		t.Fatalf("restart with no failed member: %v, want ErrNotFailed", err)
	}
}

// TestRestartByHandProcEnded: Restart of a mesh whose failed member's
// proc ended (no RestartPolicy: its owner was told) starts a proc in the
// ended one's place, its slot's next incarnation, and restarts the member
// there; the running member is left alone, and the ProcMesh reaches the
// new proc.
func TestRestartByHandProcEnded(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	m, err := actorrt.Init1((*Phoenix).Init).Spawn(ctx, procs, "phoenix-byhand-proc", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wasPid, err := pidFn.Call(procs.At("gpus", 1)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := nonces(t, m)
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(m.At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	waitFailure(t, "phoenix-byhand-proc")
	if err := m.Restart(ctx); err != nil {
		t.Fatalf("restart by hand of a member whose proc ended: %v", err)
	}
	if now := nonces(t, m); now[0] != before[0] || now[1] == before[1] {
		t.Fatalf("nonces %v then %v: want a new member 1, the same member 0", before, now)
	}
	w, err := actorrt.Method1((*Phoenix).Where).CallOne(m.At("gpus", 1), "MONARCH_RANK_GPUS").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nowPid, err := pidFn.Call(procs.At("gpus", 1)).Get(ctx)
	if err != nil {
		t.Fatalf("a remote function on the slot replaced by hand: %v", err)
	}
	if p := nowPid.Values()[0]; p == wasPid.Values()[0] || !strings.HasPrefix(w, fmt.Sprintf("pid=%d MONARCH_RANK_GPUS=1", p)) {
		t.Fatalf("member 1 runs at %q; the slot was pid %d, is pid %d: want the member on the slot's new proc, rank 1", w, wasPid.Values()[0], p)
	}
}

// TestRestartAgainAfterProcDeath: a member restarted on a new proc (its
// first one was killed) that then fails again is restarted there, on the
// proc it lives on now, by its policy and by hand.
func TestRestartAgainAfterProcDeath(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 2, Window: time.Minute}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix-again", actorrt.SpawnOptions{Restart: &policy}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	one := m.At("gpus", 1)
	first := nonces(t, m)
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(one); err != nil {
		t.Fatal(err)
	}
	moved := waitNonces(t, m, func(n []int64) bool { return n[1] != first[1] })
	// On its new proc: a panic, restarted by the policy (its second
	// restart, the limit).
	if err := actorrt.VoidMethod((*Phoenix).Panic).Broadcast(one); err != nil {
		t.Fatal(err)
	}
	again := waitNonces(t, m, func(n []int64) bool { return n[1] != moved[1] })
	assertNoFailure(t, "phoenix-again")
	// Past the limit: to the owner; then by hand, on the new proc.
	if err := actorrt.VoidMethod((*Phoenix).Panic).Broadcast(one); err != nil {
		t.Fatal(err)
	}
	waitFailure(t, "phoenix-again")
	if err := m.Restart(ctx); err != nil {
		t.Fatalf("restart by hand of the member on its new proc: %v", err)
	}
	if now := nonces(t, m); now[1] == again[1] || now[0] != first[0] {
		t.Fatalf("nonces %v then %v: want a new member 1, the same member 0", again, now)
	}
}
