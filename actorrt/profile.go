package actorrt

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobview"
)

// Profiles of a running job (`monarch profile`). The inspector of every
// proc (inspect.go) takes a CPU profile of its process for the time asked,
// or a heap profile at once, and answers with it as runtime/pprof writes
// it; the client's view (internal/jobview) asks the selected procs at once
// and takes its own. While a CPU profile runs in a process
// (core.profiling), every actor call there
// runs with the pprof labels mesh, endpoint and rank of its actor: calls
// of ordinary and concurrent endpoints, Init, Supervise and ctx.Go
// functions. When none runs, what a call pays is one atomic load.

// noLabels is the label set of a goroutine that runs no actor call.
var noLabels = context.Background()

// label sets the current goroutine's pprof labels to those of a call of
// endpoint in a, if a CPU profile runs in this process, and says whether
// it did (then unlabel undoes it when the call returns). A call that began
// before the profile did stays unlabelled.
// It is inlined: the calls pay a load and a branch.
func (a *actor) label(endpoint string) bool {
	return a.mesh.rt.profiling.Load() && a.setLabels(endpoint)
}

// setLabels sets the current goroutine's labels to those of a's calls of
// endpoint; it returns true.
func (a *actor) setLabels(endpoint string) bool {
	pprof.SetGoroutineLabels(a.labelsOf(endpoint))
	return true
}

// unlabel clears the current goroutine's pprof labels.
func unlabel() { pprof.SetGoroutineLabels(noLabels) }

// labelsOf is the label set of a's calls of endpoint, made once.
func (a *actor) labelsOf(endpoint string) context.Context {
	if v, ok := a.labels.Load(endpoint); ok {
		return v.(context.Context)
	}
	ctx := pprof.WithLabels(noLabels, pprof.Labels("mesh", a.mesh.name, "endpoint", endpoint, "rank", strconv.Itoa(a.baseRank)))
	v, _ := a.labels.LoadOrStore(endpoint, ctx)
	return v.(context.Context)
}

// Profile takes a profile of the proc (see takeProfile). It is a
// concurrent endpoint: a CPU profile that runs holds up no other question
// to the inspector.
func (procInspector) Profile(ctx *Context, args jobview.ProfileArgs) ([]byte, error) {
	return takeProfile(ctx, &ctx.actor.mesh.rt.profiling, args)
}

// takeProfile takes a heap profile (after a GC, so that it is up to date)
// or a CPU profile of the process for args.Nanos, labelling actor calls
// meanwhile (profiling set). It returns the profile as runtime/pprof writes it (gzipped
// protobuf), or an error: a CPU profile already runs in the process
// (`monarch profile` or the program's own), or ctx ended first.
func takeProfile(ctx context.Context, profiling *atomic.Bool, args jobview.ProfileArgs) ([]byte, error) {
	var b bytes.Buffer
	if args.Heap {
		runtime.GC()
		if err := pprof.Lookup("heap").WriteTo(&b, 0); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	d := time.Duration(args.Nanos)
	if d < jobctl.MinProfile || d > jobctl.MaxProfile {
		return nil, fmt.Errorf("a CPU profile of %v: want %v to %v", d, jobctl.MinProfile, jobctl.MaxProfile)
	}
	if err := pprof.StartCPUProfile(&b); err != nil {
		return nil, fmt.Errorf("no CPU profile: %v", err)
	}
	profiling.Store(true)
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	profiling.Store(false)
	pprof.StopCPUProfile()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return b.Bytes(), nil
}
