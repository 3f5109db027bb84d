package actorrt_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Restarting a failed mesh from Supervise, as the package doc describes:
// the supervisor keeps the mesh it spawned, and on a failure stops it and
// spawns a new one under a new name on the same procs.

// Flaky fails when told to, with nobody waiting (a Broadcast): that fails
// the actor and sends a MeshFailure to its owner.
type Flaky struct{ generation int }

func (f *Flaky) Init(ctx *actorrt.Context, generation int) error {
	f.generation = generation
	return nil
}
func (f *Flaky) Generation(ctx *actorrt.Context) (int, error) { return f.generation, nil }
func (f *Flaky) Break(ctx *actorrt.Context) error             { return errors.New("broken") }

// Restarter owns a mesh of Flaky and replaces it whenever a member fails.
type Restarter struct {
	procs      *actorrt.ProcMesh
	workers    *actorrt.ActorMesh[Flaky]
	generation int
	restarts   int
}

func (r *Restarter) Init(ctx *actorrt.Context, procs *actorrt.ProcMesh) error {
	r.procs = procs
	return r.start(ctx)
}

// start spawns the workers; ctx is the running endpoint's, so that this
// actor owns them.
func (r *Restarter) start(ctx *actorrt.Context) error {
	r.generation++
	w, err := actorrt.Init1((*Flaky).Init).Spawn(ctx, r.procs, fmt.Sprintf("flaky-%d", r.generation), r.generation)
	if err != nil {
		return err
	}
	r.workers = w
	return nil
}

func (r *Restarter) Supervise(ctx *actorrt.Context, f *actorrt.MeshFailure) bool {
	if f.Mesh != r.workers.Name() {
		return false // not ours to restart: pass it up
	}
	// Stop the rest of the failed mesh, then spawn a fresh one.
	if err := r.workers.Stop(ctx); err != nil {
		return false
	}
	if err := r.start(ctx); err != nil {
		return false
	}
	r.restarts++
	return true
}

func (r *Restarter) Workers(ctx *actorrt.Context) (*actorrt.ActorMesh[Flaky], error) {
	return r.workers, nil
}

func (r *Restarter) Restarts(ctx *actorrt.Context) (int, error) { return r.restarts, nil }

func init() {
	for _, err := range []error{actorrt.Register[Flaky](), actorrt.Register[Restarter]()} {
		if err != nil {
			panic(err)
		}
	}
}

func TestSuperviseRestartsAMesh(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	sup := spawn[Restarter](t, actorrt.ThisProc(ctx), "restarter", procs)
	first, err := actorrt.Method((*Restarter).Workers).CallOne(sup).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := actorrt.VoidMethod((*Flaky).Break).Broadcast(first.At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	// Supervise runs in the restarter's mailbox, before the next message.
	var second *actorrt.ActorMesh[Flaky]
	for second == nil {
		n, err := actorrt.Method((*Restarter).Restarts).CallOne(sup).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			second, err = actorrt.Method((*Restarter).Workers).CallOne(sup).Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no restart before the test's deadline")
		case <-time.After(5 * time.Millisecond):
		}
	}
	gens, err := actorrt.Method((*Flaky).Generation).Call(second).Get(ctx)
	if err != nil || fmt.Sprint(gens.Values()) != "[2 2]" {
		t.Fatalf("new mesh answers %v, %v; want [2 2]", gens, err)
	}
	if _, err := actorrt.Method((*Flaky).Generation).Call(first).Get(ctx); !errors.Is(err, actorrt.ErrStopped) && !errors.Is(err, actorrt.ErrActorFailed) {
		t.Fatalf("old mesh: %v, want ErrStopped or ErrActorFailed", err)
	}
}

// Nester spawns procs and actors of its own from an endpoint.
type Nester struct{}

func (n *Nester) Grow(ctx *actorrt.Context, size int) ([]int, error) {
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"inner", size}})
	if err != nil {
		return nil, err
	}
	defer procs.Stop(ctx)
	echo, err := actorrt.Spawn[Echo](ctx, procs, "nested-echo")
	if err != nil {
		return nil, err
	}
	v, err := actorrt.Method((*Echo).Ping).Call(echo).Get(ctx)
	if err != nil {
		return nil, err
	}
	return v.Values(), nil
}

func init() {
	if err := actorrt.Register[Nester](); err != nil {
		panic(err)
	}
}

// TestActorSpawnsProcs: an endpoint may start procs of its own on its
// host and spawn actors there, as docs/guide.md says.
func TestActorSpawnsProcs(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	n := spawn[Nester](t, procs, "nester")
	got, err := actorrt.Method1((*Nester).Grow).CallOne(n, 3).Get(ctx)
	if err != nil || fmt.Sprint(got) != "[1 1 1]" {
		t.Fatalf("Grow: %v, %v; want [1 1 1]", got, err)
	}
}

// Bystander owns a mesh of Flaky that goes on without members
// (GoOnWithout), and handles no failure: its Supervise notes each and
// returns false.
type Bystander struct {
	workers *actorrt.ActorMesh[Flaky]
	heard   []string
}

func (b *Bystander) Init(ctx *actorrt.Context, procs *actorrt.ProcMesh) error {
	w, err := actorrt.SpawnWith[Flaky](ctx, procs, "flaky-goon", actorrt.SpawnOptions{GoOnWithout: true}, 1)
	b.workers = w
	return err
}

func (b *Bystander) Supervise(ctx *actorrt.Context, f *actorrt.MeshFailure) bool {
	b.heard = append(b.heard, fmt.Sprintf("%v %s", f.GoesOn, f.ActorID))
	return false
}

func (b *Bystander) Workers(ctx *actorrt.Context) (*actorrt.ActorMesh[Flaky], error) {
	return b.workers, nil
}

func (b *Bystander) Heard(ctx *actorrt.Context) ([]string, error) { return b.heard, nil }

func init() {
	if err := actorrt.Register[Bystander](); err != nil {
		panic(err)
	}
}

// TestSuperviseGoesOn: an owner actor whose Supervise does not handle
// the news that its mesh goes on without a member (GoOnWithout) does not
// fail for it: it hears it once, lives on, and its mesh answers without
// the member.
func TestSuperviseGoesOn(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	owner, err := actorrt.Init1((*Bystander).Init).Spawn(ctx, spawnProcs(t, actorrt.Dims{{"gpus", 1}}), "bystander", procs)
	if err != nil {
		t.Fatal(err)
	}
	workers, err := actorrt.Method((*Bystander).Workers).CallOne(owner).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := actorrt.VoidMethod((*Flaky).Break).Broadcast(workers.At("gpus", 0)); err != nil {
		t.Fatal(err)
	}
	heard := actorrt.Method((*Bystander).Heard)
	deadline := time.Now().Add(20 * time.Second)
	var got []string
	for len(got) == 0 && time.Now().Before(deadline) {
		if got, err = heard.CallOne(owner).Get(ctx); err != nil {
			t.Fatalf("the owner after the news: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != 1 || got[0] != "true flaky-goon[0]" {
		t.Fatalf("the owner heard %q: want the news of flaky-goon[0], once", got)
	}
	v, err := actorrt.Method((*Flaky).Generation).Call(workers).Get(ctx)
	if err != nil || len(v.Missing()) != 1 || v.Values()[1] != 1 {
		t.Fatalf("the mesh without its member: %v, %v", v, err)
	}
	if got, err = heard.CallOne(owner).Get(ctx); err != nil || len(got) != 1 {
		t.Fatalf("the owner later: %q, %v", got, err)
	}
	assertNoFailure(t, "bystander")
}
