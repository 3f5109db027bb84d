package actorrt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// Profiles of a running job (`monarch profile`). The inspector of every
// proc (inspect.go) takes a CPU profile of its process for the time asked,
// or a heap profile at once, and answers with it as runtime/pprof writes
// it; the client asks the selected procs at once and takes its own. While
// a CPU profile runs in a process (core.profiling), every actor call there
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

// profileArgs is what the inspector's Profile is asked.
type profileArgs struct {
	Heap  bool  `msgpack:"heap"`
	Nanos int64 `msgpack:"nanos"` // a CPU profile's duration
}

// Profile takes a profile of the proc (see core.profile). It is a
// concurrent endpoint: a CPU profile that runs holds up no other question
// to the inspector.
func (procInspector) Profile(ctx *Context, args profileArgs) ([]byte, error) {
	return ctx.actor.mesh.rt.profile(ctx, args)
}

// profile takes a heap profile (after a GC, so that it is up to date) or
// a CPU profile of the process for args.Nanos, labelling actor calls
// meanwhile. It returns the profile as runtime/pprof writes it (gzipped
// protobuf), or an error: a CPU profile already runs in the process
// (`monarch profile` or the program's own), or ctx ended first.
func (rt *core) profile(ctx context.Context, args profileArgs) ([]byte, error) {
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
	rt.profiling.Store(true)
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	rt.profiling.Store(false)
	pprof.StopCPUProfile()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return b.Bytes(), nil
}

// askProfile asks proc's inspector for a profile, waiting at most until
// ctx ends.
func (rt *core) askProfile(ctx context.Context, proc string, args profileArgs) ([]byte, error) {
	return askInspector[[]byte](ctx, rt, proc, "Profile", args)
}

// ctlProfile answers an OpProfile request on the control socket: the
// selected procs (and the client, without a selection) are profiled at
// once.
func (c *client) ctlProfile(ctx context.Context, body json.RawMessage) (any, error) {
	var req jobctl.ProfileRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("profile request: %v", err)
	}
	if err := req.Check(); err != nil {
		return nil, err
	}
	if req.Timeout == 0 {
		req.Timeout = DefaultStacksTimeout
	}
	sel, infos, err := c.ctlSelect(req.Selection)
	if err != nil {
		return nil, err
	}
	ans := &jobctl.ProfileAnswer{Job: c.job, Procs: make([]jobctl.ProcProfile, len(sel))}
	args := profileArgs{Heap: req.Heap, Nanos: int64(req.Duration)}
	late := "no answer within " + req.Timeout.String()
	if !req.Heap {
		late += " after its " + req.Duration.String() + " profile"
	}
	c.askEach(ctx, sel, infos, req.Duration+req.Timeout, "profile", late, func(ctx context.Context, i int, p ctlProc) error {
		var prof []byte
		var err error
		if p.info.ID == "" {
			prof, err = c.profile(ctx, args)
		} else {
			prof, err = c.askProfile(ctx, p.info.ID, args)
		}
		ans.Procs[i].Profile = prof
		return err
	})
	for i := range ans.Procs {
		ans.Procs[i].ProcInfo = infos[i]
	}
	return ans, nil
}
