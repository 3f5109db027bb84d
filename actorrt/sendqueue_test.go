package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/actortest"
)

// TestSendQueueBound: the calls to a mesh queued while its killed
// member's restart has not settled are bounded as a mailbox is
// (WithMailboxLimit, here 3 messages): past the bound, a Broadcast and
// a Send return ErrMailboxFull and a Call's future fails with it at
// once, naming the mesh's queue and the bound; what was queued reaches
// the members once the restart settled, and the refused calls never do.
// (Before, the queue took every call for as long as the restart took.)
func TestSendQueueBound(t *testing.T) {
	dir := t.TempDir() // first: removed after the cluster closed
	c := actortest.Start(t, 1, actorrt.WithMailboxLimit(3, 1<<20))
	ctx, cancel := context.WithTimeout(c.Context(), 60*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix-bound", actorrt.SpawnOptions{Restart: &policy}, dir)
	if err != nil {
		t.Fatal(err)
	}
	hold := filepath.Join(dir, "hold-init")
	t.Cleanup(func() { os.Remove(hold) })
	appendEp := actorrt.VoidMethod1((*Phoenix).Append)
	full := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, actorrt.ErrMailboxFull) ||
			!strings.Contains(err.Error(), "the queue of calls to mesh phoenix-bound (waiting for where its members live now) has 3 messages") ||
			!strings.Contains(err.Error(), "the bound is 3 messages, 1048576 bytes (WithMailboxLimit)") {
			t.Fatalf("%s past the send queue's bound: %v, want ErrMailboxFull naming the queue, what waits and the bound", what, err)
		}
	}
	// Two rounds, a proc killed in each: what the first queued is
	// counted out once sent, so the second has the whole bound again.
	for round, want := range [][][]int{{{1, 2}, {1, 2}}, {{4, 5}, {1, 2, 4, 5}}} {
		if err := os.WriteFile(hold, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// The victim holds a call when its proc is killed: the call's
		// failure says the client heard of the end. Its restart waits
		// on hold-init.
		victim := 1 - round
		released := fmt.Sprintf("released-%d", round)
		held := actorrt.VoidMethod1((*Phoenix).Hold).CallOne(m.At("gpus", victim), released)
		if err := c.Kill(procs.Slice("gpus", victim, victim+1)); err != nil {
			t.Fatal(err)
		}
		if _, err := held.Get(ctx); !errors.Is(err, actorrt.ErrProcFailed) {
			t.Fatalf("round %d: the call held on the killed proc: %v, want ErrProcFailed", round, err)
		}
		// The killed instance's goroutine waits for this file; it is
		// abandoned, not ended (actortest): let it go.
		if err := os.WriteFile(filepath.Join(dir, released), nil, 0o600); err != nil {
			t.Fatal(err)
		}

		// Three calls fill the queue: none waits for the restart.
		for i := 1; i <= 2; i++ {
			if err := appendEp.Broadcast(m, 3*round+i); err != nil {
				t.Fatalf("round %d: queued Broadcast %d: %v", round, i, err)
			}
		}
		queued := phoenixNonce.Call(m)

		// The fourth of each kind is refused at once.
		full("Broadcast", appendEp.Broadcast(m, 3*round+3))
		now, cancelNow := context.WithTimeout(ctx, time.Second)
		_, err = phoenixNonce.Call(m).Get(now)
		cancelNow()
		full("Call", err)
		port, recv := actorrt.OpenChannel[int64](ctx)
		full("Send", phoenixNonce.Send(m, port))
		recv.Close()
		if _, err := os.Stat(hold); err != nil {
			t.Fatal("the restart settled before the queue was full")
		}

		// Once the restart settled, the queued calls reach both members,
		// in order, and the refused Broadcast reached neither (the
		// restarted member lost what it had).
		os.Remove(hold)
		ns, err := queued.Get(ctx)
		if err != nil || len(ns.Values()) != 2 {
			t.Fatalf("round %d: the queued Call: %v, %v", round, ns, err)
		}
		items, err := phoenixItems.Call(m).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := items.Values(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("round %d: items %v, want %v: the queued Broadcasts, and not the refused ones", round, got, want)
		}
	}
}
