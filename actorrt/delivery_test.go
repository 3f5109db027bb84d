package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/internal/procstat"
)

// Who receives what: a message reaches exactly the procs that host its
// recipients, and a proc's end reaches the procs that hold its meshes.

var remoteReceived = actorrt.Remote("test_received", func(ctx context.Context) (map[string]uint64, error) {
	return actorrt.ReceivedCounts(ctx), nil
})

// Holder keeps a reference to a mesh of Crashers and calls it.
type RefHolder struct {
	held *actorrt.ActorMesh[Crasher]
}

func (h *RefHolder) Hold(ctx *actorrt.Context, m *actorrt.ActorMesh[Crasher]) error {
	h.held = m
	return nil
}

func (h *RefHolder) CallHeld(ctx *actorrt.Context) (int, error) {
	return actorrt.Method((*Crasher).PID).CallOne(h.held).Get(ctx)
}

func received(t *testing.T, ctx context.Context, procs *actorrt.ProcMesh) []map[string]uint64 {
	t.Helper()
	vm, err := remoteReceived.Call(procs).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return vm.Values()
}

// TestTargetedDelivery: calls to one member, to a slice, and Choose are
// received by the procs of their members only; a whole-mesh call by all.
func TestTargetedDelivery(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 4}})
	counters := spawn[Counter](t, procs, "targeted", 0)
	getValue := actorrt.Method((*Counter).GetValue)
	send := func(what string, n int, f func() error) []uint64 {
		t.Helper()
		before := received(t, ctx, procs)
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		after := received(t, ctx, procs)
		d := make([]uint64, len(after))
		for i := range after {
			// One actor frame per proc is the counting call itself.
			d[i] = after[i]["actor"] - before[i]["actor"] - 1
		}
		return d
	}
	one := send("CallOne", 200, func() error {
		_, err := getValue.CallOne(counters.At("gpus", 2)).Get(ctx)
		return err
	})
	if one[2] != 200 || one[0]+one[1]+one[3] != 0 {
		t.Errorf("200 calls to gpus=2 reached the procs %v times, want [0 0 200 0]", one)
	}
	slice := send("Call to a slice", 50, func() error {
		_, err := getValue.Call(counters.Slice("gpus", 1, 3)).Get(ctx)
		return err
	})
	if slice[1] != 50 || slice[2] != 50 || slice[0]+slice[3] != 0 {
		t.Errorf("50 calls to gpus 1..2 reached the procs %v times, want [0 50 50 0]", slice)
	}
	choose := send("Choose", 100, func() error {
		_, err := getValue.Choose(counters).Get(ctx)
		return err
	})
	if sum := choose[0] + choose[1] + choose[2] + choose[3]; sum != 100 {
		t.Errorf("100 Chooses reached the procs %v times (%d in all), want 100 in all", choose, sum)
	}
	whole := send("Call", 10, func() error {
		_, err := getValue.Call(counters).Get(ctx)
		return err
	})
	for i, n := range whole {
		if n != 10 {
			t.Errorf("10 whole-mesh calls reached proc %d %d times", i, n)
		}
	}
}

// TestEndsReachTheHolders: a proc's end reaches the procs that hold a
// reference to its meshes (a call waiting on it fails at once), and not
// the procs that hold none.
func TestEndsReachTheHolders(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 3}})
	holder := spawn[RefHolder](t, procs.At("gpus", 0), "holder")
	victim := spawn[Crasher](t, procs.At("gpus", 2), "victim")
	if _, err := actorrt.VoidMethod1((*RefHolder).Hold).Call(holder, victim).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := actorrt.Method((*RefHolder).CallHeld).CallOne(holder).Get(ctx); err != nil {
		t.Fatal(err)
	}
	before := received(t, ctx, procs.Slice("gpus", 0, 2))
	if err := actorrt.VoidMethod1((*Crasher).Crash).Broadcast(victim, "kill"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the victim's end to reach the holder", func() bool {
		_, err := actorrt.Method((*RefHolder).CallHeld).CallOne(holder).Get(ctx)
		return errors.Is(err, actorrt.ErrProcFailed)
	})
	after := received(t, ctx, procs.Slice("gpus", 0, 2))
	if got := after[0]["gone"] - before[0]["gone"]; got < 1 {
		t.Errorf("the holder heard of %d ends, want at least 1", got)
	}
	if got := after[1]["gone"] - before[1]["gone"]; got != 0 {
		t.Errorf("a proc that holds nothing heard of %d ends, want 0", got)
	}
}

// TestEndBeforeTheReference: a reference to a mesh whose proc ended
// before the reference arrived: the holder asks the proc's agent, and a
// call to it fails at once instead of waiting for its deadline.
func TestEndBeforeTheReference(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	holder := spawn[RefHolder](t, procs.At("gpus", 0), "late-holder")
	victim := spawn[Crasher](t, procs.At("gpus", 1), "early-victim")
	if err := actorrt.VoidMethod1((*Crasher).Crash).Broadcast(victim, "kill"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client to hear of the victim's end", func() bool {
		_, err := actorrt.Method((*Crasher).PID).CallOne(victim).Get(ctx)
		return errors.Is(err, actorrt.ErrProcFailed)
	})
	if _, err := actorrt.VoidMethod1((*RefHolder).Hold).Call(holder, victim).Get(ctx); err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := actorrt.Method((*RefHolder).CallHeld).CallOne(holder).Get(callCtx)
	if !errors.Is(err, actorrt.ErrProcFailed) {
		t.Fatalf("a call to a proc that ended before the reference came: %v, want ErrProcFailed", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("it failed after %v", d)
	}
}

// waitFor waits (20s at most, looking every 10ms) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, still waiting for %s", what)
		}
	}
}

// TestOrderingWithChoose: Broadcasts to the whole mesh (its subject) and
// Chooses (one proc's subject each) from one sender reach every actor in
// send order.
func TestOrderingWithChoose(t *testing.T) { testOrderingWithChoose(t, "ordering-choose") }

// TestOrderingWithFencesAhead: the same, with at most one fence a frame:
// a broadcast after Chooses on two procs sends its second fence ahead of
// it, in an empty frame.
func TestOrderingWithFencesAhead(t *testing.T) {
	defer actorrt.SetMaxFences(1)()
	testOrderingWithChoose(t, "ordering-fences-ahead")
}

func testOrderingWithChoose(t *testing.T, name string) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"procs", 3}})
	rec := spawn[Recorder](t, procs, name)
	note := actorrt.VoidMethod1((*Recorder).Note)
	const n = 3000
	wholes := 0
	var chosen []*actorrt.Future[int64]
	for i := int64(0); i < n; i++ {
		if i%3 == 0 {
			if err := note.Broadcast(rec, i); err != nil {
				t.Fatal(err)
			}
			wholes++
		} else {
			chosen = append(chosen, actorrt.Method1((*Recorder).NoteCall).Choose(rec, i))
		}
	}
	for _, f := range chosen {
		if _, err := f.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if total, want := seenInOrder(t, ctx, rec), 3*wholes+(n-wholes); total != want {
		t.Errorf("%d messages seen in all, want %d", total, want)
	}
}

// seenInOrder checks that every Recorder of rec saw its numbers in
// increasing order, and returns how many they saw in all.
func seenInOrder(t *testing.T, ctx context.Context, rec *actorrt.ActorMesh[Recorder]) int {
	t.Helper()
	seen, err := actorrt.Method((*Recorder).Seen).Call(rec).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for r, s := range seen.Values() {
		for j := 1; j < len(s); j++ {
			if s[j] <= s[j-1] {
				t.Fatalf("actor %d saw %d after %d", r, s[j], s[j-1])
			}
		}
		total += len(s)
	}
	return total
}

// TestStoppedProcIsReported: a proc that is alive but does nothing (here
// SIGSTOP) is found out within the host timeout: its agent kills it, the
// call waiting on it fails, and its owner hears why.
func TestStoppedProcIsReported(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	c := spawn[Crasher](t, procs, "stopped")
	pid, err := actorrt.Method((*Crasher).PID).CallOne(c).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The signal lands when the kernel next schedules the proc: wait for
	// the stopped state, or a call may still be answered first.
	waitFor(t, "the proc to stop", func() bool {
		st, err := procstat.Read(pid)
		return err == nil && st.Stopped()
	})
	start := time.Now()
	got, err := actorrt.Method((*Crasher).PID).CallOne(c).Get(ctx)
	if !errors.Is(err, actorrt.ErrProcFailed) {
		state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Fatalf("a call to a stopped proc: %d, %v after %v, want ErrProcFailed (pid %d: %q)", got, err, time.Since(start), pid, state)
	}
	d := time.Since(start)
	f := waitFailure(t, "stopped")
	if !strings.Contains(f.Reason, "unresponsive") {
		t.Errorf("failure %q does not say the proc was unresponsive", f.Reason)
	}
	if d > 10*time.Second {
		t.Errorf("reported after %v, want within the host timeout (5s) and a tick", d)
	}
	t.Logf("a stopped proc was reported after %v", d.Round(time.Millisecond))
}
