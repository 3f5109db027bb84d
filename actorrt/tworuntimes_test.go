package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// useCounters spawns a proc and a Counter mesh of name on it from ctx's
// runtime, increments it n times, and returns what the mesh then holds and
// its procs, which the caller stops.
func useCounters(ctx context.Context, name string, n int) (int, *actorrt.ProcMesh, error) {
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		return 0, nil, err
	}
	c, err := actorrt.Spawn[Counter](ctx, procs, name, 0)
	if err != nil {
		return 0, procs, err
	}
	for range n {
		if err := actorrt.VoidMethod((*Counter).Increment).Broadcast(c); err != nil {
			return 0, procs, err
		}
	}
	found, err := actorrt.Lookup[Counter](ctx, name)
	if err != nil {
		return 0, procs, err
	}
	v, err := actorrt.Method((*Counter).GetValue).CallOne(found).Get(ctx)
	return v, procs, err
}

// TestTwoRuntimes runs a second client, its own job on its own embedded
// bus, in the test's process beside the tests' own: each spawns procs
// and a mesh of the same name, calls it and stops it, and neither sees the
// other's (Lookup finds each its own; a name only the other has is not
// found). With a process-wide runtime the second Run took the place of
// the first, and this could not be written.
func TestTwoRuntimes(t *testing.T) {
	ctx := testCtx(t)
	second := make(chan error, 1)
	inSecond := make(chan context.Context, 1)
	release := make(chan struct{})
	go func() {
		status := actorrt.Run(func(ctx2 context.Context) error {
			v, procs, err := useCounters(ctx2, "twin", 3)
			if procs != nil {
				defer procs.Stop(ctx2)
			}
			if err == nil && v != 3 {
				err = fmt.Errorf("the second runtime's twin holds %d, want 3", v)
			}
			if err != nil {
				second <- err
				return err
			}
			inSecond <- ctx2
			<-release // the first looks across meanwhile
			_, err = actorrt.Lookup[Counter](ctx2, "twin-first")
			if !errors.Is(err, actorrt.ErrNotFound) {
				err = fmt.Errorf("the second runtime's Lookup of the first's name: %v, want ErrNotFound", err)
				second <- err
				return err
			}
			second <- nil
			return nil
		}, actorrt.WithSpawnTimeout(60*time.Second))
		if status != 0 {
			select {
			case second <- fmt.Errorf("the second runtime ended with status %d", status):
			default:
			}
		}
	}()

	v, procs, err := useCounters(ctx, "twin", 1)
	if procs != nil {
		defer procs.Stop(ctx)
	}
	if err != nil || v != 1 {
		t.Fatalf("the first runtime's twin: %d, %v; want 1", v, err)
	}
	if _, err := actorrt.Spawn[Counter](ctx, procs, "twin-first", 0); err != nil {
		t.Fatal(err)
	}
	var ctx2 context.Context
	select {
	case ctx2 = <-inSecond:
	case err := <-second:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the second runtime did not get its mesh going")
	}
	// Each sees its own twin: a different mesh, on its own procs.
	mine, err := actorrt.Lookup[Counter](ctx, "twin")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := actorrt.Lookup[Counter](ctx2, "twin")
	if err != nil {
		t.Fatal(err)
	}
	a, err := actorrt.Method((*Counter).GetValue).CallOne(mine).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := actorrt.Method((*Counter).GetValue).CallOne(theirs).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a != 1 || b != 3 {
		t.Fatalf("twins hold %d and %d, want 1 and 3", a, b)
	}
	job1, url1, _ := actorrt.JobBus(ctx)
	job2, url2, _ := actorrt.JobBus(ctx2)
	if job1 == job2 || url1 == url2 {
		t.Fatalf("both runtimes are job %s on %s and job %s on %s", job1, url1, job2, url2)
	}
	if actorrt.ThisProc(ctx).String() == "" || actorrt.ProcIDs(actorrt.ThisProc(ctx))[0] != actorrt.ClientProc {
		t.Fatalf("ThisProc of the first is %v", actorrt.ProcIDs(actorrt.ThisProc(ctx)))
	}
	// A mesh is owned in its procs' runtime: a ctx of the other is refused.
	if _, err := actorrt.Spawn[Counter](ctx2, procs, "twin-crossed", 0); !errors.Is(err, actorrt.ErrBadArgs) {
		t.Fatalf("Spawn on the first's procs with the second's ctx: %v, want ErrBadArgs", err)
	}
	close(release)
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the second runtime did not finish")
	}
}
