package jobview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/dashboard"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/metrics"
	"github.com/monarch-go/monarch/logagg"
)

// DefaultStacksTimeout is how long `monarch stacks` waits for the procs'
// answers unless told.
const DefaultStacksTimeout = 5 * time.Second

// Config is what a View is told of its job.
type Config struct {
	Job      string // the job's id
	Proc     string // the client's proc id
	Host     string // the client's host, as the job names it
	StateDir string // where the job's log and control socket are
	// ExecOff is where the job file turns `monarch exec` off, or "".
	ExecOff string
	// Stderr is where the dashboard's URL is printed: the terminal's,
	// not the program's (the token stays out of the job's log).
	Stderr io.Writer
	// Warn logs what the job runs on without (no dashboard, no control
	// socket).
	Warn func(err error, msg string)
}

// View is the client's view of its job: the model, the control socket
// that serves it and the dashboard. Safe for concurrent use.
type View struct {
	cfg  Config
	job  Job
	feed feed

	control   *jobctl.Server
	dashboard *dashboard.Server
	dashOff   string // why there is no dashboard
}

// New is the view of job, with an empty model; Serve starts serving it.
func New(cfg Config, job Job) *View {
	return &View{cfg: cfg, job: job, feed: feed{m: NewModel()}}
}

// Step runs fn on the model, under its lock: how the runtime tells the
// model what it saw.
func (v *View) Step(fn func(*Model)) { v.feed.step(fn) }

// State is the job's state now, with the procs' figures asked for (at
// most every FiguresEvery) and waited for at most timeout (0:
// jobctl.DefaultStateTimeout): what OpState answers, and what the
// dashboard and its metrics endpoint read.
func (v *View) State(ctx context.Context, timeout time.Duration) *jobctl.JobState {
	if timeout <= 0 {
		timeout = jobctl.DefaultStateTimeout
	}
	v.feed.refresh(ctx, v.job, v.cfg.Proc, timeout)
	return v.feed.snapshot(v.job)
}

// Serve starts the job's dashboard on dashAddr (set by where; "" and ""
// for the default, which may fail without failing the job: then the job
// runs without, and Warn says why), then the control socket (which the
// job runs without if it cannot be had: Warn says why). It fails only
// when a configured dashboard address cannot be had.
func (v *View) Serve(dashAddr, where string) error {
	if err := v.serveDashboard(dashAddr, where); err != nil {
		return err
	}
	path := jobctl.SocketPath(v.cfg.StateDir, v.cfg.Job)
	srv, err := jobctl.Listen(path, map[string]jobctl.Op{
		jobctl.OpStacks:    {Handle: v.ctlStacks, Bound: jobctl.StacksBound},
		jobctl.OpProfile:   {Handle: v.ctlProfile, Bound: jobctl.ProfileBound},
		jobctl.OpExec:      {Stream: v.ctlExec, Bound: jobctl.ExecBound},
		jobctl.OpState:     {Handle: v.ctlState, Bound: jobctl.StateBound},
		jobctl.OpWatch:     {Stream: v.ctlWatch, Bound: jobctl.WatchBound},
		jobctl.OpDashboard: {Handle: v.ctlDashboard, Bound: jobctl.DashboardBound},
	})
	if err != nil {
		v.cfg.Warn(err, "monarch stacks and profile cannot reach this job")
		return nil
	}
	v.control = srv
	return nil
}

// Close stops the control socket, then the dashboard.
func (v *View) Close() {
	if v.control != nil {
		v.control.Close() // first: the job is ending, nothing more to ask
	}
	if v.dashboard != nil {
		v.dashboard.Close()
	}
}

// The job's dashboard (internal/dashboard): served from the client's
// start to its end, beside the control socket, on the address the job
// file's [dashboard] or $MONARCH_DASHBOARD gives (default a free loopback
// port), behind a token made here; its URL is printed once, on the
// terminal's stderr, and OpDashboard answers with it; /metrics beside the
// page serves the same state to Prometheus.
func (v *View) serveDashboard(addr, where string) error {
	if addr == hostsconfig.DashboardOff {
		v.dashOff = "it is turned off by " + where
		return nil
	}
	tok, err := dashboard.NewToken()
	if err == nil {
		v.dashboard, err = dashboard.Start(dashboard.Options{Addr: addr, Token: tok, Job: dashboardJob{v}, Metrics: metrics.Handler(dashboardJob{v})})
	}
	switch {
	case err != nil && where != "":
		return fmt.Errorf("the job's dashboard cannot listen on %s (set by %s): %w", addr, where, err)
	case err != nil:
		v.dashOff = "it could not start: " + err.Error()
		v.cfg.Warn(err, "the job runs without its dashboard")
		return nil
	}
	fmt.Fprintf(v.cfg.Stderr, "monarch: dashboard %s\n", v.dashboard.URL())
	return nil
}

// dashboardJob is the job as the dashboard and its metrics endpoint see
// it.
type dashboardJob struct{ v *View }

var (
	_ dashboard.Job  = dashboardJob{}
	_ metrics.Source = dashboardJob{}
)

func (d dashboardJob) State(ctx context.Context) (*jobctl.JobState, error) {
	return d.v.State(ctx, jobctl.DefaultStateTimeout), nil
}

func (d dashboardJob) Stacks(ctx context.Context, req jobctl.StacksRequest) (*jobctl.StacksAnswer, error) {
	return d.v.stacks(ctx, req)
}

func (d dashboardJob) Logs(ctx context.Context, f logagg.Filter, emit func(logagg.Line) error) error {
	return logagg.Read(ctx, d.v.cfg.StateDir, d.v.cfg.Job, f, false, emit)
}

// ctlDashboard answers an OpDashboard request.
func (v *View) ctlDashboard(context.Context, json.RawMessage) (any, error) {
	if v.dashboard == nil {
		return &jobctl.DashboardAnswer{Off: v.dashOff}, nil
	}
	return &jobctl.DashboardAnswer{URL: v.dashboard.URL()}, nil
}

// ctlState answers an OpState request.
func (v *View) ctlState(ctx context.Context, body json.RawMessage) (any, error) {
	var req jobctl.StateRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("state request: %v", err)
		}
	}
	return v.State(ctx, req.Timeout), nil
}

// ctlWatch answers an OpWatch request: a snapshot at once, then one each
// Interval in which the state changed (its figures included).
func (v *View) ctlWatch(ctx context.Context, body json.RawMessage, send func(any) error) (any, error) {
	var req jobctl.WatchRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("watch request: %v", err)
		}
	}
	if req.Timeout <= 0 {
		req.Timeout = jobctl.DefaultStateTimeout
	}
	if req.Interval <= 0 {
		req.Interval = jobctl.DefaultInterval
	}
	req.Interval = max(req.Interval, jobctl.MinInterval)
	tick := time.NewTicker(req.Interval)
	defer tick.Stop()
	ans := &jobctl.WatchAnswer{}
	var last []byte
	for {
		v.feed.refresh(ctx, v.job, v.cfg.Proc, min(req.Timeout, req.Interval))
		s := v.feed.snapshot(v.job)
		at := s.At
		s.At = time.Time{}
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(b, last) {
			s.At = at
			if err := send(s); err != nil {
				return ans, nil // the caller went away
			}
			ans.Sent++
			last = b
		}
		select {
		case <-ctx.Done():
			return ans, nil
		case <-tick.C:
		}
	}
}

// selected is the procs s selects, with what the answer says of each;
// with nothing selected the client comes first (its id is "").
func (v *View) selected(s jobctl.Selection) ([]proc, []jobctl.ProcInfo, error) {
	sel, err := selectProcs(procsOf(v.job.Live()), s)
	if err != nil {
		return nil, nil, err
	}
	if s.Empty() {
		sel = append([]proc{{}}, sel...)
	}
	infos := make([]jobctl.ProcInfo, len(sel))
	for i, p := range sel {
		if p.id == "" {
			infos[i] = jobctl.ProcInfo{Proc: v.cfg.Proc, Host: v.cfg.Host, Rank: -1}
		} else {
			infos[i] = jobctl.ProcInfo{Proc: p.id, Host: p.host, Mesh: p.mesh, Rank: p.rank}
		}
	}
	return sel, infos, nil
}

// ctlStacks answers an OpStacks request on the control socket.
func (v *View) ctlStacks(ctx context.Context, body json.RawMessage) (any, error) {
	var req jobctl.StacksRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("stacks request: %v", err)
	}
	return v.stacks(ctx, req)
}

// stacks asks the procs req selects for their stacks, all at once.
func (v *View) stacks(ctx context.Context, req jobctl.StacksRequest) (*jobctl.StacksAnswer, error) {
	if req.Timeout <= 0 {
		req.Timeout = DefaultStacksTimeout
	}
	sel, infos, err := v.selected(req.Selection)
	if err != nil {
		return nil, err
	}
	ans := &jobctl.StacksAnswer{Job: v.cfg.Job, Procs: make([]jobctl.ProcStacks, len(sel))}
	askEach(ctx, sel, infos, req.Timeout, "stacks", "no answer within "+req.Timeout.String(), func(ctx context.Context, i int, p proc) error {
		st, err := v.job.Stacks(ctx, p.id)
		if err != nil {
			return err
		}
		fillStacks(&ans.Procs[i], st)
		return nil
	})
	for i := range ans.Procs {
		ans.Procs[i].ProcInfo = infos[i]
	}
	return ans, nil
}

func fillStacks(ps *jobctl.ProcStacks, st Stacks) {
	ps.Goroutines = st.Goroutines
	for _, a := range st.Actors {
		as := jobctl.ActorState{Actor: a.Actor, Endpoint: a.Endpoint}
		if a.Endpoint != "" {
			as.Since = time.Unix(0, a.Since)
		}
		ps.Actors = append(ps.Actors, as)
	}
}

// ctlProfile answers an OpProfile request on the control socket: the
// selected procs (and the client, without a selection) are profiled at
// once.
func (v *View) ctlProfile(ctx context.Context, body json.RawMessage) (any, error) {
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
	sel, infos, err := v.selected(req.Selection)
	if err != nil {
		return nil, err
	}
	ans := &jobctl.ProfileAnswer{Job: v.cfg.Job, Procs: make([]jobctl.ProcProfile, len(sel))}
	args := ProfileArgs{Heap: req.Heap, Nanos: int64(req.Duration)}
	late := "no answer within " + req.Timeout.String()
	if !req.Heap {
		late += " after its " + req.Duration.String() + " profile"
	}
	askEach(ctx, sel, infos, req.Duration+req.Timeout, "profile", late, func(ctx context.Context, i int, p proc) error {
		prof, err := v.job.Profile(ctx, p.id, args)
		ans.Procs[i].Profile = prof
		return err
	})
	for i := range ans.Procs {
		ans.Procs[i].ProcInfo = infos[i]
	}
	return ans, nil
}
