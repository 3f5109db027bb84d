package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Phoenix is restarted in place. Its Init takes a directory: each
// instance is told apart by a nonce, and its Init fails while the file
// fail-init is there. Its Cleanup leaves a line with its nonce in the
// directory, which the next instance's Init reads back (a checkpoint).
type Phoenix struct {
	dir      string
	nonce    int64
	items    []int
	restored string
}

func (p *Phoenix) Init(ctx *actorrt.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "fail-init")); err == nil {
		return errors.New("told to fail in Init")
	}
	// While the file hold-init is there (at most 30s), Init waits: a
	// restart that has not settled.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "hold-init")); err != nil {
			break
		}
	}
	p.dir, p.nonce = dir, rand.Int64()
	b, _ := os.ReadFile(p.checkpoint(ctx))
	p.restored = string(b)
	return nil
}

func (p *Phoenix) checkpoint(ctx *actorrt.Context) string {
	return filepath.Join(p.dir, fmt.Sprintf("checkpoint-%d", ctx.ActorInstance().Rank().Rank()))
}

func (p *Phoenix) Cleanup(ctx *actorrt.Context, cause error) error {
	return os.WriteFile(p.checkpoint(ctx), []byte(fmt.Sprintf("%d", p.nonce)), 0o600)
}

// Restored is what the instance's Init read of the checkpoint.
func (p *Phoenix) Restored(ctx *actorrt.Context) (string, error) { return p.restored, nil }

func (p *Phoenix) Nonce(ctx *actorrt.Context) (int64, error) { return p.nonce, nil }
func (p *Phoenix) Dir(ctx *actorrt.Context) (string, error)  { return p.dir, nil }
func (p *Phoenix) Append(ctx *actorrt.Context, v int) error  { p.items = append(p.items, v); return nil }
func (p *Phoenix) Items(ctx *actorrt.Context) ([]int, error) { return p.items, nil }
func (p *Phoenix) Panic(ctx *actorrt.Context) error          { panic("phoenix down") }

// Hold holds the actor's mailbox until the actor fails, which a
// goroutine of its (ctx.Go) makes it do once the file name exists in its
// directory (or after 30s): what the test sends behind Hold is in the
// mailbox when it fails.
func (p *Phoenix) Hold(ctx *actorrt.Context, name string) error {
	ctx.Go(func(ctx *actorrt.Context) error {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(p.dir, name)); err == nil {
				break
			}
		}
		return errors.New("phoenix down at " + name)
	})
	<-ctx.Done()
	return nil
}

var (
	phoenixNonce = actorrt.Method((*Phoenix).Nonce)
	phoenixItems = actorrt.Method((*Phoenix).Items)
)

func nonces(t *testing.T, m *actorrt.ActorMesh[Phoenix]) []int64 {
	t.Helper()
	v, err := phoenixNonce.Call(m).Get(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return v.Values()
}

// TestRestartInPlace: a member that panics with nobody to receive it is
// replaced by a new instance, at the same rank of the same mesh, with
// Init run again with the spawn arguments; the reference the client holds
// keeps working. The calls in its mailbox fail with an error that names
// the restart; its one-way messages, and what is sent after, reach the
// new instance, in order, after the failed one's Cleanup. The owner
// hears nothing: the policy handled it.
func TestRestartInPlace(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.DefaultRestartPolicy()
	policy.Backoff = 0
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix", actorrt.SpawnOptions{Restart: &policy}, dir)
	if err != nil {
		t.Fatal(err)
	}
	before := nonces(t, m)

	one := m.At("gpus", 1)
	if err := actorrt.VoidMethod1((*Phoenix).Hold).Broadcast(one, "go"); err != nil {
		t.Fatal(err)
	}
	inFlight := phoenixNonce.CallOne(one) // queued behind Hold
	// One-way messages queued behind it too: the new instance gets them.
	for i := 100; i < 103; i++ {
		if err := actorrt.VoidMethod1((*Phoenix).Append).Broadcast(one, i); err != nil {
			t.Fatal(err)
		}
	}
	// Once another actor of that proc answers, what was sent to it before
	// is in the failing member's mailbox: one sender's messages reach a
	// proc in order.
	echo := spawn[Echo](t, procs, "phoenix-echo")
	if _, err := actorrt.Method((*Echo).Ping).CallOne(echo.At("gpus", 1)).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = inFlight.Get(ctx)
	if !errors.Is(err, actorrt.ErrActorFailed) || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("a call in the failed member's mailbox: %v, want ErrActorFailed naming the restart", err)
	}
	// Sent after the failure: held for the new instance, then delivered
	// in order.
	for i := range 20 {
		if err := actorrt.VoidMethod1((*Phoenix).Append).Broadcast(one, i); err != nil {
			t.Fatal(err)
		}
	}
	items, err := phoenixItems.CallOne(one).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{100, 101, 102, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}; !slices.Equal(items, want) {
		t.Fatalf("the new instance got %v, want %v", items, want)
	}
	after := nonces(t, m)
	if after[0] != before[0] || after[1] == before[1] {
		t.Fatalf("nonces %v then %v: want member 0 the same instance, member 1 a new one", before, after)
	}
	// The failed instance's Cleanup ran before the new one's Init.
	if got, err := actorrt.Method((*Phoenix).Restored).CallOne(one).Get(ctx); err != nil || got != fmt.Sprint(before[1]) {
		t.Fatalf("the new instance's Init read %q, %v; want the failed one's checkpoint %d", got, err, before[1])
	}
	if d, err := actorrt.Method((*Phoenix).Dir).CallOne(one).Get(ctx); err != nil || d != dir {
		t.Fatalf("the new instance's Init argument: %q, %v", d, err)
	}
	assertNoFailure(t, "phoenix")
}

// TestRestartAlong: a scope along gpus restarts the failed member's row
// (the members that share its hosts coordinate), not the other row.
func TestRestartAlong(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 2, Window: time.Minute, Scope: actorrt.RestartAlong("gpus")}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix-row", actorrt.SpawnOptions{Restart: &policy}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := nonces(t, m)
	if err := actorrt.VoidMethod((*Phoenix).Panic).Broadcast(m.At("hosts", 1).At("gpus", 0)); err != nil {
		t.Fatal(err)
	}
	after := waitNonces(t, m, func(n []int64) bool { return n[2] != before[2] && n[3] != before[3] })
	if after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("nonces %v then %v: want the hosts=0 row untouched", before, after)
	}
	assertNoFailure(t, "phoenix-row")
}

// TestRestartLimit: a member whose every restart fails (its Init) is
// restarted MaxRestarts times, then its failure reaches the owner (here
// the client's fault hook), naming the limit; the owner can then restart
// it by hand once the cause is gone.
func TestRestartLimit(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 2, Window: time.Minute, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix-limit", actorrt.SpawnOptions{Restart: &policy}, dir)
	if err != nil {
		t.Fatal(err)
	}
	before := nonces(t, m)
	one := m.At("gpus", 0)
	if err := m.Restart(ctx); !errors.Is(err, actorrt.ErrNotFailed) {
		t.Fatalf("restart of running members: %v, want ErrNotFailed", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fail-init"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := actorrt.VoidMethod((*Phoenix).Panic).Broadcast(one); err != nil {
		t.Fatal(err)
	}
	f := waitFailure(t, "phoenix-limit")
	if f.Base != 0 || !strings.Contains(f.Reason, "2 restarts in 1m0s, the limit") || !strings.Contains(f.Reason, "told to fail in Init") {
		t.Fatalf("escalated failure: %+v", f)
	}
	if _, err := phoenixNonce.CallOne(one).Get(ctx); !errors.Is(err, actorrt.ErrActorFailed) {
		t.Fatalf("a call to the member given up on: %v, want ErrActorFailed", err)
	}
	// By hand: refused while Init still fails, then it comes back.
	if err := one.Restart(ctx); err == nil || !strings.Contains(err.Error(), "told to fail in Init") {
		t.Fatalf("restart by hand while Init fails: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "fail-init")); err != nil {
		t.Fatal(err)
	}
	if err := one.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	after := nonces(t, m)
	if after[0] == before[0] || after[1] != before[1] {
		t.Fatalf("nonces %v then %v: want a new member 0, the same member 1", before, after)
	}
}

// TestRestartBadPolicy: a policy with zero or negative limits, or a scope
// along a dimension the mesh lacks, is refused at spawn.
func TestRestartBadPolicy(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	for _, p := range []actorrt.RestartPolicy{
		{MaxRestarts: 0, Window: time.Minute},
		{MaxRestarts: 1, Window: -time.Second},
		{MaxRestarts: 1, Window: time.Minute, Backoff: -1},
		{MaxRestarts: 1, Window: time.Minute, Scope: actorrt.RestartAlong("hosts")},
	} {
		_, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix-bad", actorrt.SpawnOptions{Restart: &p}, t.TempDir())
		if !errors.Is(err, actorrt.ErrBadArgs) || !strings.Contains(err.Error(), "restart policy") {
			t.Errorf("policy %+v: %v, want ErrBadArgs naming the restart policy", p, err)
		}
	}
}

// waitNonces calls Nonce until ok holds (members restarting hold the call
// for their new instance), at most 30s.
func waitNonces(t *testing.T, m *actorrt.ActorMesh[Phoenix], ok func([]int64) bool) []int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := phoenixNonce.Call(m).Get(testCtx(t))
		if err == nil && ok(v.Values()) {
			return v.Values()
		}
		if time.Now().After(deadline) {
			t.Fatalf("members not restarted within 30s: %v, %v", v, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assertNoFailure fails if a failure of mesh reached the client.
func assertNoFailure(t *testing.T, mesh string) {
	t.Helper()
	failures.mu.Lock()
	defer failures.mu.Unlock()
	for _, f := range failures.all {
		if f.Mesh == mesh {
			t.Fatalf("the client heard of a failure the policy handled: %v", f)
		}
	}
}

// Die ends the actor's proc at once (SIGKILL to itself).
func (p *Phoenix) Die(ctx *actorrt.Context) error {
	return syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// Where is the actor's proc: its pid and the value of an environment
// variable it was started with.
func (p *Phoenix) Where(ctx *actorrt.Context, env string) (string, error) {
	return fmt.Sprintf("pid=%d %s=%s", os.Getpid(), env, os.Getenv(env)), nil
}

// PhoenixHolder holds a reference to a Phoenix mesh, passed to it, and
// calls it: a holder other than the mesh's owner.
type PhoenixHolder struct{ m *actorrt.ActorMesh[Phoenix] }

func (h *PhoenixHolder) Hold(ctx *actorrt.Context, m *actorrt.ActorMesh[Phoenix]) error {
	h.m = m
	return nil
}

func (h *PhoenixHolder) Nonces(ctx *actorrt.Context) ([]int64, error) {
	v, err := phoenixNonce.Call(h.m).Get(ctx)
	return v.Values(), err
}

// TestRestartAfterProcDeath: a member whose proc is killed is restarted
// on a new proc that its host agent starts in the old one's place (same
// rank variables, a new pid), with Init run again; the owner's reference
// and one another actor holds keep working, and the other member is the
// same instance. The owner hears nothing: the policy handled it.
func TestRestartAfterProcDeath(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	m, holder := spawnHeldPhoenix(t, procs, "phoenix-proc", actorrt.SpawnOptions{Restart: &policy}, dir)
	where := actorrt.Method1((*Phoenix).Where)
	before := nonces(t, m)
	wasAt, err := where.CallOne(m.At("gpus", 1), "MONARCH_RANK_GPUS").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(m.At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	after := waitNonces(t, m, func(n []int64) bool { return n[1] != before[1] })
	if after[0] != before[0] {
		t.Fatalf("nonces %v then %v: want member 0 the same instance", before, after)
	}
	nowAt, err := where.CallOne(m.At("gpus", 1), "MONARCH_RANK_GPUS").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nowAt == wasAt || !strings.HasSuffix(nowAt, " MONARCH_RANK_GPUS=1") {
		t.Fatalf("member 1 was at %q, is at %q: want a new pid with the same rank variable", wasAt, nowAt)
	}
	held, err := actorrt.Method((*PhoenixHolder).Nonces).CallOne(holder).Get(ctx)
	if err != nil || !slices.Equal(held, after) {
		t.Fatalf("the holder's reference: %v, %v; want %v", held, err, after)
	}
	assertNoFailure(t, "phoenix-proc")
	// The state feed shows member 1 on its new proc, running, and that
	// proc at the old one's rank of the proc mesh.
	feedShowsMove(t, ctx, "phoenix-proc", 1)
	// Stopping the proc mesh stops the proc in the old one's place.
	var pid int
	if _, err := fmt.Sscanf(nowAt, "pid=%d", &pid); err != nil {
		t.Fatal(err)
	}
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, []int{pid})
}

// feedShowsMove checks the job state feed: member rank of mesh name runs
// on a proc that is not its first, and that proc is at its rank of its
// proc mesh, with one respawn.
func feedShowsMove(t *testing.T, ctx context.Context, name string, rank int) {
	t.Helper()
	s := clientState(t, ctx)
	for _, am := range s.ActorMeshes {
		if am.Name != name {
			continue
		}
		mem := am.Members[rank]
		if mem.State != "running" {
			t.Fatalf("feed: member %d of %s: %+v; want running", rank, name, mem)
		}
		for _, pm := range s.ProcMeshes {
			for _, p := range pm.Procs {
				if p.Proc == mem.Proc {
					if p.Respawns != 1 || p.State != "running" {
						t.Fatalf("feed: proc %+v of member %d: want running, one respawn", p, rank)
					}
					return
				}
			}
		}
		t.Fatalf("feed: member %d of %s is on %s, which no proc mesh shows: %+v", rank, name, mem.Proc, s.ProcMeshes)
	}
	t.Fatalf("feed: no actor mesh %s", name)
}

// TestProcReplacedForEveryMesh: two meshes with restart policies have
// members on a proc that is killed. One proc is started in its place,
// and both meshes' members move there (neither meets a proc replaced
// already); nobody hears of a failure. The ProcMesh the client holds
// reaches the new proc: a remote function runs there, and a new mesh is
// spawned there.
func TestProcReplacedForEveryMesh(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	var meshes []*actorrt.ActorMesh[Phoenix]
	for _, name := range []string{"slot-a", "slot-b"} {
		m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, name, actorrt.SpawnOptions{Restart: &policy}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		meshes = append(meshes, m)
	}
	wasPid, err := pidFn.Call(procs.At("gpus", 1)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	where := actorrt.Method1((*Phoenix).Where)
	befores := [][]int64{nonces(t, meshes[0]), nonces(t, meshes[1])}
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(meshes[0].At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	var at []string
	for i, m := range meshes {
		before := befores[i]
		after := waitNonces(t, m, func(n []int64) bool { return n[1] != before[1] })
		if after[0] != before[0] {
			t.Fatalf("%s: nonces %v then %v: want member 0 the same instance", m.Name(), before, after)
		}
		w, err := where.CallOne(m.At("gpus", 1), "MONARCH_RANK_GPUS").Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, w)
	}
	if at[0] != at[1] || strings.HasPrefix(at[0], fmt.Sprintf("pid=%d ", wasPid.Values()[0])) {
		t.Fatalf("member 1 of the two meshes runs at %q and %q: want one new proc (the old one was pid %d)", at[0], at[1], wasPid.Values()[0])
	}
	assertNoFailure(t, "slot-a")
	assertNoFailure(t, "slot-b")
	// The proc mesh's slot 1 is the new proc, for a remote function and
	// for a new mesh.
	nowPid, err := pidFn.Call(procs.At("gpus", 1)).Get(ctx)
	if err != nil {
		t.Fatalf("a remote function on the replaced slot: %v", err)
	}
	if want := fmt.Sprintf("pid=%d ", nowPid.Values()[0]); !strings.HasPrefix(at[0], want) {
		t.Fatalf("the proc mesh's slot 1 is pid %d; the members moved to %q", nowPid.Values()[0], at[0])
	}
	m3 := spawn[Phoenix](t, procs.At("gpus", 1), "slot-c", t.TempDir())
	if w, err := where.CallOne(m3, "MONARCH_RANK_GPUS").Get(ctx); err != nil || w != at[0] {
		t.Fatalf("a mesh spawned on the replaced slot runs at %q (%v); want %q", w, err, at[0])
	}
}

// PhoenixOwner spawns a Phoenix mesh with a restart policy on the procs
// it is given, and owns it: a mesh owned by another proc than the client.
type PhoenixOwner struct{ m *actorrt.ActorMesh[Phoenix] }

func (o *PhoenixOwner) Spawn(ctx *actorrt.Context, procs *actorrt.ProcMesh, dir string) error {
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "slot-owned", actorrt.SpawnOptions{Restart: &policy}, dir)
	o.m = m
	return err
}

func (o *PhoenixOwner) Where(ctx *actorrt.Context) (string, error) {
	return actorrt.Method1((*Phoenix).Where).CallOne(o.m.At("gpus", 1), "MONARCH_RANK_GPUS").Get(ctx)
}

// TestProcReplacedAcrossOwners: two meshes with restart policies on one
// proc, one owned by the client and one by an actor of another proc. The
// proc is killed: both owners ask its host agent for a proc in its
// place, the agent starts one, and the second asker gets that one: both
// meshes' members run on the same new proc, and nobody hears of a
// failure.
func TestProcReplacedAcrossOwners(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	mine, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "slot-mine", actorrt.SpawnOptions{Restart: &policy}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	owner := spawn[PhoenixOwner](t, spawnProcs(t, actorrt.Dims{{"gpus", 1}}), "slot-owner")
	if _, err := actorrt.VoidMethod2((*PhoenixOwner).Spawn).CallOne(owner, procs, t.TempDir()).Get(ctx); err != nil {
		t.Fatal(err)
	}
	before := nonces(t, mine)
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(mine.At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	waitNonces(t, mine, func(n []int64) bool { return n[1] != before[1] })
	where := actorrt.Method1((*Phoenix).Where)
	mineAt, err := where.CallOne(mine.At("gpus", 1), "MONARCH_RANK_GPUS").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ownedAt string
	deadline := time.Now().Add(30 * time.Second)
	for {
		ownedAt, err = actorrt.Method((*PhoenixOwner).Where).CallOne(owner).Get(ctx)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || ownedAt != mineAt {
		t.Fatalf("member 1 of the client's mesh runs at %q, of the other proc's at %q (%v): want the same new proc", mineAt, ownedAt, err)
	}
	assertNoFailure(t, "slot-mine")
	assertNoFailure(t, "slot-owned")
}

// spawnHeldPhoenix spawns a Phoenix mesh on procs with opts, and a
// PhoenixHolder (name-holder) on a proc of its own that holds it.
func spawnHeldPhoenix(t *testing.T, procs *actorrt.ProcMesh, name string, opts actorrt.SpawnOptions, dir string) (*actorrt.ActorMesh[Phoenix], *actorrt.ActorMesh[PhoenixHolder]) {
	t.Helper()
	ctx := testCtx(t)
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, name, opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	holder := spawn[PhoenixHolder](t, spawnProcs(t, actorrt.Dims{{"gpus", 1}}), name+"-holder")
	if _, err := actorrt.VoidMethod1((*PhoenixHolder).Hold).CallOne(holder, m).Get(ctx); err != nil {
		t.Fatal(err)
	}
	return m, holder
}

// NoncesMesh is Nonces as its ValueMesh: what the holder's call found,
// sent back to the caller.
func (h *PhoenixHolder) NoncesMesh(ctx *actorrt.Context) (actorrt.ValueMesh[int64], error) {
	return phoenixNonce.Call(h.m).Get(ctx)
}

// TestGoOnWithout: a 2 x 2 mesh spawned with GoOnWithout and a policy of
// one restart; a member that panics twice is restarted once, then
// missing. The owner hears of it once, saying the mesh goes on without
// it. Calls answer with 3 values and the missing mark (At fails with
// ErrMissing, Values has the zero value there), through the owner's
// reference, one looked up, and one another actor holds (whose
// ValueMesh crosses the wire with its mark); Stream and Accumulate skip
// it, Choose never picks it, CallOne to it fails at once with ErrMissing
// naming it and why, Broadcast reaches the others. A restart by hand
// brings it back.
func TestGoOnWithout(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 1, Window: time.Minute}
	m, holder := spawnHeldPhoenix(t, procs, "phoenix-goon", actorrt.SpawnOptions{Restart: &policy, GoOnWithout: true}, dir)
	panicky := actorrt.VoidMethod((*Phoenix).Panic)
	victim := m.At("hosts", 1).At("gpus", 1)
	before := nonces(t, m)
	if err := panicky.Broadcast(victim); err != nil {
		t.Fatal(err)
	}
	waitNonces(t, m, func(v []int64) bool { return v[3] != before[3] && v[3] != 0 })
	assertNoFailure(t, "phoenix-goon")
	if err := panicky.Broadcast(victim); err != nil {
		t.Fatal(err)
	}
	f := waitFailure(t, "phoenix-goon")
	if !f.GoesOn || f.Base != 3 || !strings.Contains(f.Reason, "goes on without it") || !strings.Contains(f.Reason, "1 restart in 1m0s") {
		t.Fatalf("failure %+v: want member 3's, saying the mesh goes on without it", f)
	}
	looked, err := actorrt.Lookup[Phoenix](ctx, "phoenix-goon")
	if err != nil {
		t.Fatal(err)
	}
	for what, call := range map[string]func() (actorrt.ValueMesh[int64], error){
		"owner":  func() (actorrt.ValueMesh[int64], error) { return phoenixNonce.Call(m).Get(ctx) },
		"lookup": func() (actorrt.ValueMesh[int64], error) { return phoenixNonce.Call(looked).Get(ctx) },
		"holder": func() (actorrt.ValueMesh[int64], error) {
			return actorrt.Method((*PhoenixHolder).NoncesMesh).CallOne(holder).Get(ctx)
		},
	} {
		v, err := call()
		if err != nil {
			t.Fatalf("%s: a call to the mesh without its member: %v", what, err)
		}
		missing := v.Missing()
		if len(missing) != 1 || missing[0].Rank() != 3 || v.Has(missing[0]) || v.Len() != 4 || v.Values()[3] != 0 {
			t.Fatalf("%s: %v, missing %v: want 3 values and member 3 missing", what, v, missing)
		}
		if _, err := v.At(missing[0]); !errors.Is(err, actorrt.ErrMissing) {
			t.Fatalf("%s: At the missing member: %v, want ErrMissing", what, err)
		}
		for r, x := range v.Values()[:3] {
			if x == 0 || x != before[r] {
				t.Fatalf("%s: values %v: want members 0-2 unchanged, %v", what, v.Values(), before[:3])
			}
		}
	}
	n := 0
	for _, err := range phoenixNonce.Stream(m).All(ctx) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("stream gave %d replies, want 3", n)
	}
	count, err := actorrt.Accumulate(ctx, phoenixNonce.Stream(looked), 0, func(n int, _ int64) int { return n + 1 })
	if err != nil || count != 3 {
		t.Fatalf("accumulate over the looked-up reference: %d, %v; want 3 replies", count, err)
	}
	for range 20 {
		if _, err := phoenixNonce.Choose(m).Get(ctx); err != nil {
			t.Fatalf("choose: %v", err)
		}
	}
	_, err = phoenixNonce.CallOne(victim).Get(ctx)
	if !errors.Is(err, actorrt.ErrMissing) || !strings.Contains(err.Error(), "phoenix-goon[3]") || !strings.Contains(err.Error(), "1 restart in 1m0s") {
		t.Fatalf("call to the missing member: %v, want ErrMissing naming it and why", err)
	}
	if _, err := phoenixNonce.CallOne(looked.At("hosts", 1).At("gpus", 1)).Get(ctx); !errors.Is(err, actorrt.ErrMissing) {
		t.Fatalf("call to the missing member through the looked-up reference: %v, want ErrMissing", err)
	}
	if err := actorrt.VoidMethod1((*Phoenix).Append).Broadcast(m, 7); err != nil {
		t.Fatalf("broadcast: %v", err)
	}
	items, err := phoenixItems.Call(m.At("hosts", 1)).Get(ctx)
	if err != nil || len(items.Missing()) != 1 || !slices.Equal(items.Values()[0], []int{7}) {
		t.Fatalf("items of host 1 after the broadcast: %v, %v", items, err)
	}
	if err := victim.Restart(ctx); err != nil {
		t.Fatalf("restart by hand of the missing member: %v", err)
	}
	v, err := phoenixNonce.Call(m).Get(ctx)
	if err != nil || v.Missing() != nil || v.Values()[3] == 0 {
		t.Fatalf("after the restart by hand: %v, %v; want every member back", v, err)
	}
	assertNoFailure(t, "phoenix-goon")
}

// SlotHolder holds a ProcMesh it was given, on another proc than the
// one that spawned it, and uses it.
type SlotHolder struct{ procs *actorrt.ProcMesh }

func (h *SlotHolder) Hold(ctx *actorrt.Context, procs *actorrt.ProcMesh) error {
	h.procs = procs
	return nil
}

// Pid runs a remote function on the held mesh's slot i.
func (h *SlotHolder) Pid(ctx *actorrt.Context, i int) (int, error) {
	v, err := pidFn.Call(h.procs.At("gpus", i)).Get(ctx)
	if err != nil {
		return 0, err
	}
	return v.Values()[0], nil
}

// SpawnWhere spawns a Phoenix on the held mesh's slot i and says where
// it runs.
func (h *SlotHolder) SpawnWhere(ctx *actorrt.Context, i int, dir string) (string, error) {
	m, err := actorrt.Init1((*Phoenix).Init).Spawn(ctx, h.procs.At("gpus", i), "slot-held", dir)
	if err != nil {
		return "", err
	}
	defer m.Stop(ctx)
	return actorrt.Method1((*Phoenix).Where).CallOne(m, "MONARCH_RANK_GPUS").Get(ctx)
}

// TestProcReplacedForAnotherHolder: an actor on another proc holds the
// client's ProcMesh. A proc of it is killed and replaced, by the restart
// policy of a mesh the client owns: the holder's remote function and its
// Spawn on that slot reach the new proc, with no call of the holder's
// (the client announces the replacement to every holder of the slot's
// host agent's procs).
func TestProcReplacedForAnotherHolder(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "slot-for-holder", actorrt.SpawnOptions{Restart: &policy}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	holder := spawn[SlotHolder](t, spawnProcs(t, actorrt.Dims{{"gpus", 1}}), "slot-holder")
	if _, err := actorrt.VoidMethod1((*SlotHolder).Hold).CallOne(holder, procs).Get(ctx); err != nil {
		t.Fatal(err)
	}
	holderPid := actorrt.Method1((*SlotHolder).Pid)
	was, err := holderPid.CallOne(holder, 1).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := nonces(t, m)
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(m.At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	waitNonces(t, m, func(n []int64) bool { return n[1] != before[1] })
	now, err := pidFn.Call(procs.At("gpus", 1)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := holderPid.CallOne(holder, 1).Get(ctx)
	if err != nil || got != now.Values()[0] || got == was {
		t.Fatalf("the holder's remote function on the replaced slot: pid %d (%v); the slot was pid %d, is pid %d", got, err, was, now.Values()[0])
	}
	w, err := actorrt.Method2((*SlotHolder).SpawnWhere).CallOne(holder, 1, t.TempDir()).Get(ctx)
	if want := fmt.Sprintf("pid=%d MONARCH_RANK_GPUS=1", now.Values()[0]); err != nil || w != want {
		t.Fatalf("the holder's mesh spawned on the replaced slot runs at %q (%v); want %q", w, err, want)
	}
	assertNoFailure(t, "slot-for-holder")
}
