package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

func TestChannel(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	port, recv := actorrt.OpenChannel[int](ctx)
	if err := port.Send(3); err != nil {
		t.Fatal(err)
	}
	if v, err := recv.Recv().Get(ctx); err != nil || v != 3 {
		t.Fatalf("Recv = %d, %v", v, err)
	}
	// Futures of successive Recv calls get successive values, whichever
	// comes first.
	a, b := recv.Recv(), recv.Recv()
	port.Send(4)
	port.Send(5)
	va, _ := a.Get(ctx)
	vb, _ := b.Get(ctx)
	if va != 4 || vb != 5 {
		t.Fatalf("got %d, %d; want 4, 5", va, vb)
	}
	recv.Close()
	if _, err := recv.Recv().Get(ctx); !errors.Is(err, actorrt.ErrStopped) {
		t.Fatalf("Recv after Close: %v", err)
	}
}

// TestPortThroughTwoHops: the client's port goes to an actor in one proc,
// which hands it to an actor in another; that one sends on it.
func TestPortThroughTwoHops(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	hops := spawn[Hop](t, procs, "hops")
	port, recv := actorrt.OpenChannel[string](ctx)
	defer recv.Close()
	if _, err := actorrt.VoidMethod2((*Hop).Forward).CallOne(hops.At("gpus", 0), hops.Slice("gpus", 1, 2), port).Get(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := recv.Recv().Get(ctx)
	if err != nil || got != "via hops[0] to hops[1]" {
		t.Fatalf("received %q, %v", got, err)
	}
}

// TestSendToPort: Send asks every member to answer on a port of ours.
func TestSendToPort(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 3}})
	echo := spawn[Echo](t, procs, "send-echo")
	port, recv := actorrt.OpenChannel[string](ctx)
	defer recv.Close()
	if err := actorrt.Method1((*Echo).Say).Send(echo, port, "hi"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if v, err := recv.Recv().Get(ctx); err != nil || v != "hi" {
			t.Fatalf("reply %d: %q, %v", i, v, err)
		}
	}
	// Errors reach the port too.
	vport, vrecv := actorrt.OpenChannel[actorrt.Void](ctx)
	defer vrecv.Close()
	if err := actorrt.VoidMethod1((*Echo).Fail).Send(echo.At("gpus", 1), vport, "nope"); err != nil {
		t.Fatal(err)
	}
	var ae *actorrt.ActorError
	if _, err := vrecv.Recv().Get(ctx); !errors.As(err, &ae) || ae.Message != "nope" {
		t.Fatalf("error on the port: %v", err)
	}
}

// TestExplicitPortOutOfOrder: Hold keeps reply ports; Release answers them
// last first. Each caller still gets its own answer.
func TestExplicitPortOutOfOrder(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	h := spawn[Holder](t, procs, "holder")
	var futs []*actorrt.Future[int]
	for i := 1; i <= 5; i++ {
		futs = append(futs, actorrt.PortMethod1((*Holder).Hold).CallOne(h, i))
	}
	for _, f := range futs {
		select {
		case <-f.Done():
			t.Fatal("an answer came before Release")
		default:
		}
	}
	if n, err := actorrt.Method((*Holder).Release).CallOne(h).Get(ctx); err != nil || n != 5 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	for i, f := range futs {
		if v, err := f.Get(ctx); err != nil || v != (i+1)*10 {
			t.Fatalf("call %d: %d, %v", i+1, v, err)
		}
	}
	// An answer sent from another goroutine after the endpoint returned.
	if v, err := actorrt.PortMethod1((*Holder).Later).CallOne(h, "x").Get(ctx); err != nil || v != "later: x" {
		t.Fatalf("Later = %q, %v", v, err)
	}
	// Call gathers explicit answers by rank like any other.
	vm, err := actorrt.PortMethod1((*Holder).Later).Call(h, "y").Get(ctx)
	if err != nil || !reflect.DeepEqual(vm.Values(), []string{"later: y"}) {
		t.Fatalf("CallPort = %v, %v", vm, err)
	}
	// An endpoint that fails instead of answering: its error is the
	// answer, and since the endpoint could not answer, the actor fails and
	// its owner (the client, here) hears of it.
	r := spawn[Holder](t, procs, "refuser")
	if _, err := actorrt.PortMethod((*Holder).Refuse).CallOne(r).Get(ctx); err == nil || !strings.Contains(err.Error(), "will not answer") {
		t.Fatalf("Refuse: %v", err)
	}
	if f := waitFailure(t, "refuser"); !strings.Contains(f.Reason, "will not answer") {
		t.Fatalf("failure: %v", f)
	}
}

// TestUnansweredPortFailsWhenActorStops: an endpoint that returns without
// answering leaves its caller waiting only until the actor stops.
func TestUnansweredPortFailsWhenActorStops(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	h := spawn[Holder](t, procs, "ignorer")
	f := actorrt.PortMethod((*Holder).Ignore).CallOne(h)
	if v, err := actorrt.Method((*Holder).Release).CallOne(h).Get(ctx); err != nil || v != 0 {
		t.Fatalf("Release = %d, %v", v, err) // the Ignore call has been handled
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx); !errors.Is(err, actorrt.ErrStopped) {
		t.Fatalf("unanswered call: %v, want ErrStopped", err)
	}
	// Calls after the stop fail at once, here and from any other holder.
	if _, err := actorrt.Method((*Holder).Release).CallOne(h).Get(ctx); !errors.Is(err, actorrt.ErrStopped) {
		t.Fatalf("call after Stop: %v", err)
	}
	// The name is free again.
	h2 := spawn[Holder](t, procs, "ignorer")
	if _, err := actorrt.Method((*Holder).Release).CallOne(h2).Get(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSendToGonePort: a closed receiver, or a proc that is gone, makes
// Send fail rather than vanish.
func TestSendToGonePort(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	port, recv := actorrt.OpenChannel[int](ctx)
	recv.Close()
	// The first send cannot know; the receiving proc tells us, and later
	// sends fail.
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		err = port.Send(1)
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, actorrt.ErrStopped) {
		t.Fatalf("send to a closed channel: %v", err)
	}

	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		t.Fatal(err)
	}
	hop := spawn[Hop](t, procs, "port-owner")
	remote, err := actorrt.Method((*Hop).Open).CallOne(hop).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Send(1); err != nil {
		t.Fatalf("send to a live remote channel: %v", err)
	}
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		err = remote.Send(2)
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, actorrt.ErrStopped) || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("send to a port of a stopped proc: %v", err)
	}
}

// TestMeshReferences: the guide's dataloaders and trainers: the loaders'
// mesh goes to every trainer's Init, which keeps its own slice of it.
func TestMeshReferences(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	loaders := spawn[DataLoader](t, procs, "dataloader")
	trainers := spawn[Trainer](t, procs, "dtrainers", loaders)
	for round := 1; round <= 2; round++ {
		got, err := actorrt.Method1((*Trainer).Step).Call(trainers, fmt.Sprint("in", round)).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for p, v := range got.Items() {
			want := fmt.Sprintf("trainer%v step with loader%v#%d and in%d", p, p, round, round)
			if v != want {
				t.Errorf("%v: %q, want %q", p, v, want)
			}
		}
	}
	// A HostMesh travels too: a trainer spawns procs and actors of its own.
	n, err := actorrt.Method1((*Trainer).SpawnHere).CallOne(trainers.At("hosts", 1).At("gpus", 1), actorrt.ThisHost(ctx)).Get(ctx)
	if err != nil || n != 2 {
		t.Fatalf("SpawnHere = %d, %v", n, err)
	}
	// A mesh of the wrong actor type does not decode into a mesh of another.
	if _, err := actorrt.Init1((*Trainer).Init).Spawn(ctx, procs, "wrong", loaders.Slice("gpus", 0, 1)); err == nil {
		t.Fatal("Init with a slice of the wrong shape succeeded")
	}
}

func TestRemoteFunctions(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	pids, err := pidFn.Call(procs).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{os.Getpid(): true}
	for _, p := range pids.Values() {
		if seen[p] {
			t.Fatalf("pids %v: not one process per proc", pids.Values())
		}
		seen[p] = true
	}
	sums, err := addFn.Call(procs.Slice("gpus", 1, 2), 41).Get(ctx)
	if err != nil || !reflect.DeepEqual(sums.Values(), []int{42, 42}) || sums.Extent().String() != "{hosts: 2, gpus: 1}" {
		t.Fatalf("add = %v, %v", sums, err)
	}
	if _, err := addFn.Call(procs, -1).Get(ctx); err == nil || !strings.Contains(err.Error(), "negative -1") {
		t.Fatalf("failing remote: %v", err)
	}
	// Send: one message per proc on our port.
	port, recv := actorrt.OpenChannel[int](ctx)
	defer recv.Close()
	if err := pidFn.Send(procs, port); err != nil {
		t.Fatal(err)
	}
	var got []int
	for i := 0; i < 4; i++ {
		p, err := recv.Recv().Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	want := slices.Clone(pids.Values())
	slices.Sort(got)
	slices.Sort(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Send gave %v, want %v", got, want)
	}
	dup := actorrt.Remote("test_pid", func(context.Context) (int, error) { return 0, nil })
	if _, err := dup.Call(procs).Get(ctx); !errors.Is(err, actorrt.ErrNameTaken) {
		t.Fatalf("a second test_pid: %v", err)
	}
}

// TestStreamDoesNotWaitForTheSlowest: rank 0 answers only once its gate is
// opened, which this test does after the other three answers came.
func TestStreamDoesNotWaitForTheSlowest(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 4}})
	slow := spawn[Slow](t, procs, "slow")
	// Another mesh on the same procs: its member on gpus=0 opens the gate
	// that the busy member there waits for.
	gates := spawn[Slow](t, procs, "gates")
	var got []int
	for v, err := range actorrt.Method((*Slow).Wait).Stream(slow).All(ctx) {
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, v)
		if len(got) == 3 {
			if slices.Contains(got, 0) {
				t.Fatalf("rank 0 answered before its gate opened: %v", got)
			}
			if _, err := actorrt.VoidMethod((*Slow).OpenGate).CallOne(gates.At("gpus", 0)).Get(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 4 || got[3] != 0 {
		t.Fatalf("stream order %v, want rank 0 last", got)
	}
}

func TestChooseSpreads(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 4}})
	w := spawn[Whoami](t, procs, "choose")
	seen := map[string]int{}
	for i := 0; i < 200; i++ {
		info, err := actorrt.Method((*Whoami).Info).Choose(w).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[strings.Split(info, "|")[0]]++
	}
	if len(seen) != 4 {
		t.Fatalf("200 Choose calls reached %v", seen)
	}
}

func TestActorInstance(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 1}, {"gpus", 2}})
	w := spawn[Whoami](t, procs, "whoami")
	info, err := actorrt.Method((*Whoami).Info).CallOne(w.At("hosts", 0).At("gpus", 1)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "whoami[1]|{hosts: 0, gpus: 1}|whoami|{hosts: 1, gpus: 2}|true|{hosts: 1, gpus: 2}"
	if info != want {
		t.Fatalf("Info = %q, want %q", info, want)
	}
}
