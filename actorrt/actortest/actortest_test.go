package actortest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/actortest"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// Counter is the tests' actor: a value, and the pid-free place it runs.
type Counter struct{ value int }

func (c *Counter) Init(ctx *actorrt.Context, start int) error { c.value = start; return nil }
func (c *Counter) Add(ctx *actorrt.Context, n int) (int, error) {
	c.value += n
	return c.value, nil
}

func (c *Counter) Value(ctx *actorrt.Context) (int, error) { return c.value, nil }

var (
	value    = actorrt.Method((*Counter).Value)
	add      = actorrt.Method1((*Counter).Add)
	counters = actorrt.Init1((*Counter).Init)
)

func init() {
	if err := actorrt.Register[Counter](); err != nil {
		panic(err)
	}
}

// TestKillRestarts: a 4 x 8 mesh with a restart policy; one proc killed
// is restarted on a new proc, with its state lost, and the mesh answers
// again whole. The whole scenario is timed (see the package doc).
func TestKillRestarts(t *testing.T) {
	start := time.Now()
	c := actortest.Start(t, 4)
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 8}})
	if err != nil {
		t.Fatal(err)
	}
	policy := actorrt.DefaultRestartPolicy()
	policy.Backoff = 0
	mesh, err := actorrt.SpawnWith[Counter](ctx, procs, "counters", actorrt.SpawnOptions{Restart: &policy}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := add.Call(mesh, 1).Get(ctx); err != nil {
		t.Fatal(err)
	}
	spawned := time.Since(start)
	victim := procs.Slice("hosts", 2, 3).Slice("gpus", 5, 6)
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	// The member on the killed proc comes back with Init's value; the
	// others kept theirs.
	restarted(t, ctx, mesh, 2*8+5, 11)
	t.Logf("4 x 8: spawned and called in %v, killed and restarted in %v more", spawned, time.Since(start)-spawned)
	// The victim's slot is the proc started in its place now: a second
	// kill kills that one, and the member comes back again.
	if _, err := add.Call(mesh, 1).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(victim); err != nil {
		t.Fatalf("a kill of the slot's new proc: %v", err)
	}
	restarted(t, ctx, mesh, 2*8+5, 12)
	closing := time.Now()
	c.Close()
	t.Logf("closed in %v", time.Since(closing))
}

// TestNoJobRecord: a cluster's job is a test's, not one of the user's:
// it leaves no record in the state dir for monarch status to list, where
// a program run directly keeps one.
func TestNoJobRecord(t *testing.T) {
	c, err := actortest.New(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := c.Context()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	m, err := counters.Spawn(ctx, procs, "unlisted", 1)
	if err == nil {
		_, err = value.Call(m).Get(ctx)
	}
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	records, err := jobstate.List(hostsconfig.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		t.Errorf("the cluster left a job record: %s (%s)", r.Job, r.Program)
	}
}

// restarted waits until a whole-mesh call succeeds again after a kill,
// and checks that member killed came back with Init's value (10) while
// the others kept theirs (others).
func restarted(t *testing.T, ctx context.Context, mesh *actorrt.ActorMesh[Counter], killed, others int) {
	t.Helper()
	var got []int
	for {
		vm, err := value.Call(mesh).Get(ctx)
		if err == nil {
			got = vm.Values()
			break
		}
		if !errors.Is(err, actorrt.ErrProcFailed) && !errors.Is(err, actorrt.ErrActorFailed) {
			t.Fatalf("a call after the kill: %v", err)
		}
	}
	for r, v := range got {
		if r == killed && v != 10 || r != killed && v != others {
			t.Fatalf("member %d has %d (all: %v): want 10 for the killed member %d, %d for the others", r, v, got, killed, others)
		}
	}
}
