package actortest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/actortest"
)

// TestLoseHostWithPolicy: the members of a mesh with a restart policy
// whose host is lost are not restarted (there is no agent to start a
// proc in their procs' place): each failure reaches the owner (the
// client's fault hook), naming the host's agent that ended; the members
// on the other host go on.
func TestLoseHostWithPolicy(t *testing.T) {
	c := actortest.Start(t, 2, actorrt.WithHostTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	policy := actorrt.RestartPolicy{MaxRestarts: 10, Window: time.Minute}
	mesh, err := counters.SpawnWith(ctx, procs, "counters", actorrt.SpawnOptions{Restart: &policy}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LoseHost(1); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for len(seen) < 2 {
		f := nextFailure(t, ctx, c)
		// Its host's agent (c-2, the simulated host) ended with it.
		if f.Mesh != "counters" || f.Coords[0] != 1 || !strings.Contains(f.Reason, "its restart failed") || !strings.Contains(f.Reason, "proc c-2:") {
			t.Fatalf("failure %v: want one of a member of host 1 of mesh counters, saying why it was not restarted", f)
		}
		seen[f.Base] = true
	}
	if _, err := add.Call(mesh.Slice("hosts", 0, 1), 1).Get(ctx); err != nil {
		t.Fatalf("a call to the members of the host left: %v", err)
	}
}

// TestLoseHostGoOnWithout: a mesh spawned with GoOnWithout, with a
// restart policy or none, whose host is lost goes on without the members there: the owner hears
// of each once, saying so; calls answer with the other host's values and
// the lost ones marked missing, a call to one of them fails with
// ErrMissing, and a broadcast reaches the rest; an actor elsewhere that
// holds the mesh learns from its owner that the members are missing.
func TestLoseHostGoOnWithout(t *testing.T) {
	policy := actorrt.RestartPolicy{MaxRestarts: 10, Window: time.Minute}
	t.Run("policy", func(t *testing.T) { loseHostGoOn(t, &policy) })
	t.Run("no-policy", func(t *testing.T) { loseHostGoOn(t, nil) })
}

func loseHostGoOn(t *testing.T, policy *actorrt.RestartPolicy) {
	c := actortest.Start(t, 2, actorrt.WithHostTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := counters.SpawnWith(ctx, procs, "counters", actorrt.SpawnOptions{Restart: policy, GoOnWithout: true}, 5)
	if err != nil {
		t.Fatal(err)
	}
	holderProcs, err := c.Hosts().At("hosts", 0).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		t.Fatal(err)
	}
	holder, err := actorrt.Spawn[Holder](ctx, holderProcs, "holder")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := actorrt.VoidMethod1((*Holder).Hold).CallOne(holder, mesh).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.LoseHost(1); err != nil {
		t.Fatal(err)
	}
	for seen := map[int]bool{}; len(seen) < 2; {
		f := nextFailure(t, ctx, c)
		if f.ProcLost {
			continue // with no policy, the proc mesh's loss too, for its owner
		}
		if f.Mesh != "counters" || f.Coords[0] != 1 || !f.GoesOn || seen[f.Base] || !strings.Contains(f.Reason, "goes on without it") {
			t.Fatalf("failure %v (seen %v): want one of each member of host 1, saying the mesh goes on without it", f, seen)
		}
		seen[f.Base] = true
	}
	v, err := add.Call(mesh, 1).Get(ctx)
	if err != nil {
		t.Fatalf("a call to the mesh without host 1: %v", err)
	}
	if got := v.Values(); len(v.Missing()) != 2 || v.Missing()[0].Rank() != 2 || got[0] != 6 || got[1] != 6 || got[2] != 0 || got[3] != 0 {
		t.Fatalf("call: %v, missing %v: want [6 6 missing missing]", v, v.Missing())
	}
	if _, err := add.CallOne(mesh.At("hosts", 1).At("gpus", 0), 1).Get(ctx); !errors.Is(err, actorrt.ErrMissing) {
		t.Fatalf("a call to a lost member: %v, want ErrMissing", err)
	}
	if err := add.Broadcast(mesh, 10); err != nil {
		t.Fatalf("broadcast: %v", err)
	}
	if v, err := value.Call(mesh.At("hosts", 0)).Get(ctx); err != nil || v.Values()[0] != 16 || v.Values()[1] != 16 {
		t.Fatalf("after the broadcast: %v, %v", v, err)
	}
	// A holder elsewhere asks the owner, and goes on without them too.
	held, err := actorrt.Method((*Holder).Values).CallOne(holder).Get(ctx)
	if err != nil || len(held.Missing()) != 2 || held.Values()[0] != 16 {
		t.Fatalf("a call through a reference another actor holds: %v, %v; want [16 16 missing missing]", held, err)
	}
	for {
		select {
		case f := <-c.Failures():
			if !f.ProcLost {
				t.Fatalf("a second report: %v", f)
			}
			continue
		default:
		}
		break
	}
}

// Holder holds a reference to a mesh of counters, passed to it, and
// calls it: a holder other than the mesh's owner.
type Holder struct{ m *actorrt.ActorMesh[Counter] }

func (h *Holder) Hold(ctx *actorrt.Context, m *actorrt.ActorMesh[Counter]) error {
	h.m = m
	return nil
}

func (h *Holder) Values(ctx *actorrt.Context) (actorrt.ValueMesh[int], error) {
	return value.Call(h.m).Get(ctx)
}

func init() {
	if err := actorrt.Register[Holder](); err != nil {
		panic(err)
	}
}
