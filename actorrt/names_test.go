package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// The actors of the names tests register themselves: TestMain's list is
// the other tests'.
func init() {
	for _, err := range []error{actorrt.Register[Controller](), actorrt.Register[Asker]()} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// Controller is a job's singleton in the names tests: it hands out
// tickets from one counter.
type Controller struct {
	instance int64
	tickets  int
}

var (
	// controllerInits counts, per mesh name, the Inits of Controllers that
	// ran in this process (the client, where GetOrSpawn puts them).
	controllerInits sync.Map // string -> *atomic.Int64
	controllerSeq   atomic.Int64
)

func initsOf(name string) int64 {
	n, ok := controllerInits.Load(name)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func (c *Controller) Init(ctx *actorrt.Context, label string) error {
	if label == "fail" {
		return errors.New("this controller refuses to start")
	}
	n, _ := controllerInits.LoadOrStore(ctx.ActorInstance().MeshName(), new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	c.instance = controllerSeq.Add(1)
	return nil
}

// Ticket is what a Controller hands out.
type Ticket struct {
	Instance int64  // which Controller of its process
	Proc     string // the process it runs in
	N        int    // from its counter: 1, 2, ...
}

func (c *Controller) Register(ctx *actorrt.Context, who string) (Ticket, error) {
	c.tickets++
	return Ticket{Instance: c.instance, Proc: ctx.ActorInstance().Proc(), N: c.tickets}, nil
}

var register = actorrt.Method1((*Controller).Register)

// Asker uses the job's names from its endpoints.
type Asker struct{}

// Race gets the controller of name and registers with it.
func (a *Asker) Race(ctx *actorrt.Context, name string) (Ticket, error) {
	c, err := actorrt.Init1((*Controller).Init).GetOrSpawn(ctx, name, "asked by "+ctx.ActorInstance().ID())
	if err != nil {
		return Ticket{}, err
	}
	return register.CallOne(c, ctx.ActorInstance().ID()).Get(ctx)
}

// Values finds the Counter mesh of name and returns its members' values.
func (a *Asker) Values(ctx *actorrt.Context, name string) ([]int, error) {
	c, err := actorrt.Lookup[Counter](ctx, name)
	if err != nil {
		return nil, err
	}
	v, err := actorrt.Method((*Counter).GetValue).Call(c).Get(ctx)
	return v.Values(), err
}

// LookupController looks name up as a Controller mesh.
func (a *Asker) LookupController(ctx *actorrt.Context, name string) (string, error) {
	c, err := actorrt.Lookup[Controller](ctx, name)
	if err != nil {
		return "", err
	}
	return c.Name(), nil
}

// StopThenLookup stops the Counter mesh of name, then looks it up again:
// its name must be free.
func (a *Asker) StopThenLookup(ctx *actorrt.Context, name string) error {
	c, err := actorrt.Lookup[Counter](ctx, name)
	if err != nil {
		return err
	}
	if err := c.Stop(ctx); err != nil {
		return err
	}
	_, err = actorrt.Lookup[Counter](ctx, name)
	return err
}

var (
	raceFor          = actorrt.Method1((*Asker).Race)
	lookupValues     = actorrt.Method1((*Asker).Values)
	lookupController = actorrt.Method1((*Asker).LookupController)
	stopThenLookup   = actorrt.VoidMethod1((*Asker).StopThenLookup)
)

// wantErr checks that err is target and that its text names every one
// of names.
func wantErr(t *testing.T, what string, err, target error, names ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v, want %v", what, err, target)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("%s: %q does not name %s", what, err, n)
		}
	}
}

// TestLookup: an actor of a proc finds a mesh the client spawned by its
// name and calls it; a name of a mesh of another type, a missing name
// and a bad name are clear errors, in a proc and in the client.
func TestLookup(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	spawn[Counter](t, procs, "lookup-counters", 7)
	askers := spawn[Asker](t, procs, "lookup-askers")

	got, err := lookupValues.Call(askers, "lookup-counters").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got.Values() {
		if !slices.Equal(v, []int{7, 7}) {
			t.Fatalf("the askers saw %v, want [7 7] each", got.Values())
		}
	}
	here, err := actorrt.Lookup[Counter](ctx, "lookup-counters")
	if err != nil {
		t.Fatal(err)
	}
	if n := here.Extent().NumRanks(); n != 2 || here.Name() != "lookup-counters" {
		t.Fatalf("the client found %v", here)
	}

	t.Run("another type", func(t *testing.T) {
		_, err := lookupController.Call(askers, "lookup-counters").Get(ctx)
		wantErr(t, "in a proc", err, actorrt.ErrWrongType, "lookup-counters", "Counter", "Controller")
		_, err = actorrt.Lookup[Controller](ctx, "lookup-counters")
		wantErr(t, "in the client", err, actorrt.ErrWrongType, "lookup-counters", "Counter", "Controller")
		_, err = actorrt.GetOrSpawn[Controller](ctx, "lookup-counters", "x")
		wantErr(t, "GetOrSpawn", err, actorrt.ErrWrongType, "lookup-counters", "Counter", "Controller")
	})
	t.Run("missing", func(t *testing.T) {
		_, err := lookupValues.Call(askers, "no-such-mesh").Get(ctx)
		wantErr(t, "in a proc", err, actorrt.ErrNotFound, "no-such-mesh")
		_, err = actorrt.Lookup[Counter](ctx, "no-such-mesh")
		wantErr(t, "in the client", err, actorrt.ErrNotFound, "no-such-mesh")
	})
	t.Run("bad name", func(t *testing.T) {
		_, err := lookupValues.Call(askers, "a.b").Get(ctx)
		wantErr(t, "in a proc", err, actorrt.ErrBadArgs, "a.b")
		_, err = actorrt.Lookup[Counter](ctx, "")
		wantErr(t, "in the client", err, actorrt.ErrBadArgs)
		_, err = actorrt.GetOrSpawn[Controller](ctx, "a>b", "x")
		wantErr(t, "GetOrSpawn", err, actorrt.ErrBadArgs, "a>b")
		_, err = actorrt.GetOrSpawn[Controller](ctx, "bad-args", 3)
		wantErr(t, "GetOrSpawn of bad arguments", err, actorrt.ErrBadArgs, "string")
	})
}

// TestNamesFirstWins: two live meshes may share a name; the first one
// spawned has it, and once it is stopped the next one. A stopped mesh's
// name is free, whoever stopped it, and so is the name of a mesh whose
// procs were all stopped.
func TestNamesFirstWins(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	first := spawn[Counter](t, procs.At("gpus", 0), "twice", 1)
	second := spawn[Counter](t, procs.At("gpus", 1), "twice", 2)
	valueOf := func() (int, error) {
		m, err := actorrt.Lookup[Counter](ctx, "twice")
		if err != nil {
			return 0, err
		}
		return actorrt.Method((*Counter).GetValue).CallOne(m).Get(ctx)
	}
	if v, err := valueOf(); v != 1 || err != nil {
		t.Fatalf("twice = %d, %v; want the first (1)", v, err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := valueOf(); v != 2 || err != nil {
		t.Fatalf("after the first stopped: twice = %d, %v; want the second (2)", v, err)
	}
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := valueOf()
	wantErr(t, "after both stopped", err, actorrt.ErrNotFound, "twice")

	// Stopped by an actor of a proc: the name is free for its next Lookup.
	spawn[Counter](t, procs, "stopped-by-a-proc", 0)
	askers := spawn[Asker](t, procs.At("gpus", 0), "stop-askers")
	_, err = stopThenLookup.CallOne(askers, "stopped-by-a-proc").Get(ctx)
	wantErr(t, "a proc's Lookup after its Stop", err, actorrt.ErrNotFound, "stopped-by-a-proc")

	// Its procs stopped: the client hears of each end, then frees the name.
	more := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	spawn[Counter](t, more, "on-stopped-procs", 0)
	if err := more.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := actorrt.Lookup[Counter](ctx, "on-stopped-procs")
		if errors.Is(err, actorrt.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the name of a mesh whose procs were stopped is still held 20s later: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGetOrSpawnRace: 8 actors on 8 procs, released by one message, all
// ask for the same controller at once: one is spawned, once, in the
// client, and each caller gets a ticket of its own from it.
func TestGetOrSpawnRace(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	const name = "controller-race"
	procs := spawnProcs(t, actorrt.Dims{{"procs", 8}})
	askers := spawn[Asker](t, procs, "racers")
	tickets, err := raceFor.Call(askers, name).Get(ctx) // one publish reaches all 8
	if err != nil {
		t.Fatal(err)
	}
	var ns []int
	for _, tk := range tickets.Values() {
		if tk.Instance != tickets.Values()[0].Instance || tk.Proc != tickets.Values()[0].Proc {
			t.Fatalf("the racers got different controllers: %+v", tickets.Values())
		}
		ns = append(ns, tk.N)
	}
	slices.Sort(ns)
	if !slices.Equal(ns, []int{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("tickets %v, want 1..8 once each", ns)
	}
	if n := initsOf(name); n != 1 {
		t.Fatalf("the controller's Init ran %d times in the client, want once", n)
	}
	// The client's own use: the same controller, no new spawn.
	c, err := actorrt.Init1((*Controller).Init).GetOrSpawn(ctx, name, "asked by the client")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := register.CallOne(c, "client").Get(ctx)
	if err != nil || tk.N != 9 || tk.Instance != tickets.Values()[0].Instance {
		t.Fatalf("the client's ticket %+v, %v; want ticket 9 of the same controller", tk, err)
	}
	if n := initsOf(name); n != 1 {
		t.Fatalf("the controller's Init ran %d times, want once", n)
	}
}

// TestGetOrSpawnOutlivesAsker: the singleton belongs to the client, not
// to the actor that asked first: it answers after that actor's mesh, and
// its proc, are stopped. An actor in the client's own proc asks the same
// way, without a message.
func TestGetOrSpawnOutlivesAsker(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	for _, where := range []string{"proc", "client"} {
		t.Run(where, func(t *testing.T) {
			name := "controller-of-" + where
			procs := actorrt.ThisProc(ctx)
			if where == "proc" {
				procs = spawnProcs(t, actorrt.Dims{{"procs", 1}})
			}
			asker := spawn[Asker](t, procs, "first-asker-"+where)
			first, err := raceFor.CallOne(asker, name).Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := asker.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if where == "proc" {
				if err := procs.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			c, err := actorrt.Lookup[Controller](ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := register.CallOne(c, "client").Get(ctx)
			if err != nil || tk.N != 2 || tk.Instance != first.Instance {
				t.Fatalf("after its asker stopped: ticket %+v, %v; want ticket 2 of controller %d", tk, err, first.Instance)
			}
			if n := initsOf(name); n != 1 {
				t.Fatalf("the controller's Init ran %d times, want once", n)
			}
		})
	}
}

// TestGetOrSpawnFailed: a first spawn whose Init fails gives its error to
// every caller waiting on it, and leaves the name free: the next use
// spawns again.
func TestGetOrSpawnFailed(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	const name = "controller-fails"
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = actorrt.Init1((*Controller).Init).GetOrSpawn(ctx, name, "fail")
		}()
	}
	wg.Wait() // each GetOrSpawn is bounded by ctx and the spawn timeout
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "refuses to start") || !strings.Contains(err.Error(), name) {
			t.Fatalf("caller %d: %v, want Init's error", i, err)
		}
	}
	if _, err := actorrt.Lookup[Controller](ctx, name); !errors.Is(err, actorrt.ErrNotFound) {
		t.Fatalf("after a failed first spawn: %v, want ErrNotFound", err)
	}
	c, err := actorrt.Init1((*Controller).Init).GetOrSpawn(ctx, name, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if tk, err := register.CallOne(c, "client").Get(ctx); err != nil || tk.N != 1 {
		t.Fatalf("ticket %+v, %v; want 1", tk, err)
	}
	if n := initsOf(name); n != 1 {
		t.Fatalf("the controller's Init succeeded %d times, want once", n)
	}
}

// TestGetOrSpawnContext: a caller whose ctx has ended gets its error,
// not a hang, and spawns nothing.
func TestGetOrSpawnContext(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithCancel(rootCtx(t))
	cancel()
	const name = "controller-never-asked"
	_, err := actorrt.Init1((*Controller).Init).GetOrSpawn(ctx, name, "x")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("with an ended ctx: %v", err)
	}
	if _, err := actorrt.Lookup[Controller](testCtx(t), name); !errors.Is(err, actorrt.ErrNotFound) {
		t.Fatalf("after a GetOrSpawn with an ended ctx: %v, want ErrNotFound", err)
	}
}
