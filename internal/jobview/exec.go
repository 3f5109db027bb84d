package jobview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/wire"
)

// Running a command on the job's hosts (`monarch exec`). The view serves
// jobctl.OpExec on the control socket: it asks the host agent of each
// selected host to run the command (wire.OpExec, through Job.Exec; the
// agent runs it as the job's user, not as a proc of the job: see
// internal/hostagent's exec.go), passes each piece of output on to the
// caller as it comes, and answers with how the command ended on each
// host. When the caller asks it to end (Ctrl-C), or the request's timeout
// passes, it asks the agents to stop their commands and waits, bounded,
// for their ends.
//
// The job's hosts are those of its host agents (Job.ExecHosts): the
// agents a launcher started, then the client's own host. They are the
// hosts `monarch stacks --host` and the log lines name.

// maxExecQueue bounds the output held for a caller that reads slower than
// the hosts write; what comes past it is dropped and counted.
const maxExecQueue = 8 << 20

// selectExecHosts picks the hosts req names (all with req.All); a host
// the job does not have is an error naming those it has.
func selectExecHosts(all []ExecHost, req jobctl.ExecRequest) ([]ExecHost, error) {
	if req.All {
		return all, nil
	}
	var out []ExecHost
	for _, name := range req.Hosts {
		i := slices.IndexFunc(all, func(h ExecHost) bool { return h.Name == name })
		if i < 0 {
			names := make([]string, len(all))
			for j, h := range all {
				names[j] = h.Name
			}
			return nil, fmt.Errorf("no host %q in the job; its hosts: %s", name, strings.Join(names, ", "))
		}
		if !slices.Contains(out, all[i]) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// ctlExec answers an OpExec request on the control socket.
func (v *View) ctlExec(ctx context.Context, body json.RawMessage, send func(any) error) (any, error) {
	var req jobctl.ExecRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("exec request: %v", err)
	}
	switch {
	case v.cfg.ExecOff != "":
		return nil, fmt.Errorf("exec is turned off for job %s by %s ([exec] enabled = false)", v.cfg.Job, v.cfg.ExecOff)
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return nil, errors.New("no command to run")
	case req.All == (len(req.Hosts) > 0):
		return nil, errors.New("say where to run the command: hosts, or all")
	case req.Timeout < 0 || req.Grace < 0:
		return nil, fmt.Errorf("timeout %v, grace %v: want 0 or more", req.Timeout, req.Grace)
	}
	grace := req.Grace
	if grace <= 0 {
		grace = jobctl.DefaultExecGrace
	}
	all, err := v.job.ExecHosts(ctx)
	if err != nil {
		return nil, err
	}
	sel, err := selectExecHosts(all, req)
	if err != nil {
		return nil, err
	}
	// The agents stop the commands themselves after this long, whatever
	// becomes of this client.
	backstop := jobctl.MaxOpTime
	if req.Timeout > 0 {
		backstop = req.Timeout
	}
	backstop += jobctl.ExecStopBound(grace)

	q := newExecQueue()
	runs := make([]*execRun, len(sel))
	for i, h := range sel {
		r := &execRun{host: h.Name, agent: h.Agent, q: q, end: make(chan struct{})}
		runs[i] = r
		if err := v.job.AgentGone(h.Agent); err != nil {
			r.finish(-1, "its host agent is gone: "+err.Error(), 0)
			continue
		}
		xr := wire.ExecReq{Argv: req.Argv, GraceMS: grace.Milliseconds(), TimeoutMS: backstop.Milliseconds()}
		id, done, err := v.job.Exec(h.Agent, xr, r)
		if done != nil {
			defer done()
		}
		r.id = id
		if err != nil {
			r.finish(-1, "cannot ask its host agent: "+err.Error(), 0)
		}
	}

	// The output goes to the caller from one goroutine; a caller that is
	// gone stops the commands.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		var failed error
		for {
			evs, closed := q.take()
			for _, ev := range evs {
				if failed == nil {
					if failed = send(ev); failed != nil {
						stopRun()
					}
				}
			}
			if closed && len(evs) == 0 {
				return
			}
			if len(evs) == 0 {
				<-q.wake
			}
		}
	}()

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	stopping := ""
ends:
	for _, r := range runs {
		select {
		case <-r.end:
		case <-runCtx.Done():
			stopping = "stopped"
			break ends
		case <-timeout:
			stopping = "stopped: --timeout " + req.Timeout.String() + " passed"
			break ends
		}
	}
	if stopping != "" {
		for _, r := range runs {
			if !r.ended() && r.id != "" {
				v.job.StopExec(r.agent, r.id)
			}
		}
		bound := jobctl.ExecStopBound(grace)
		t := time.NewTimer(bound)
		defer t.Stop()
	wait:
		for _, r := range runs {
			select {
			case <-r.end:
			case <-t.C:
				break wait
			}
		}
		for _, r := range runs {
			r.finish(-1, fmt.Sprintf("no end from its host agent within %v of the stop", bound), 0)
		}
	}
	q.close()
	<-pumped // bounded: each send has jobctl.IOTimeout

	ans := &jobctl.ExecAnswer{Job: v.cfg.Job, Hosts: make([]jobctl.ExecHost, len(runs))}
	for i, r := range runs {
		ans.Hosts[i] = r.res
		ans.Hosts[i].Dropped += q.droppedOf(r.host)
		if stopping != "" && strings.HasSuffix(r.res.Reason, "(stopped)") {
			ans.Hosts[i].Reason = strings.TrimSuffix(r.res.Reason, "(stopped)") + "(" + stopping + ")"
		}
	}
	return ans, nil
}

// execRun is one host's command: it takes what its agent sends (on the
// client's dispatcher).
type execRun struct {
	host, agent string
	id          string // the command's id at its agent; "" if never asked
	q           *execQueue
	end         chan struct{} // closed once res is set
	once        sync.Once
	res         jobctl.ExecHost
}

// Output implements ExecSink.
func (r *execRun) Output(ev wire.ExecEvent) bool {
	if !ev.End {
		r.q.push(jobctl.ExecEvent{Host: r.host, Stream: int(ev.Stream), Data: ev.Data})
		return true
	}
	r.finish(ev.Status, ev.Reason, ev.Dropped)
	return false
}

// Broken implements ExecSink.
func (r *execRun) Broken(reason string) { r.finish(-1, reason, 0) }

// finish sets the host's end, once; later ones do nothing.
func (r *execRun) finish(status int, reason string, dropped int64) {
	r.once.Do(func() {
		r.res = jobctl.ExecHost{Host: r.host, Status: status, Reason: reason, Dropped: dropped}
		close(r.end)
	})
}

func (r *execRun) ended() bool {
	select {
	case <-r.end:
		return true
	default:
		return false
	}
}

// execQueue holds output for the caller, up to maxExecQueue bytes; what
// comes past it is counted by host and stream, and told in its place.
type execQueue struct {
	mu      sync.Mutex
	evs     []jobctl.ExecEvent
	bytes   int
	dropped map[[2]string]int64 // by host and stream, not yet told
	total   map[string]int64    // by host, all told
	closed  bool
	wake    chan struct{} // a value after each push and the close
}

func newExecQueue() *execQueue {
	return &execQueue{dropped: map[[2]string]int64{}, total: map[string]int64{}, wake: make(chan struct{}, 1)}
}

// push adds ev (never blocks).
func (q *execQueue) push(ev jobctl.ExecEvent) {
	q.mu.Lock()
	if q.bytes+len(ev.Data) > maxExecQueue {
		q.dropped[[2]string{ev.Host, strconv.Itoa(ev.Stream)}] += int64(len(ev.Data))
		q.total[ev.Host] += int64(len(ev.Data))
	} else {
		q.evs = append(q.evs, ev)
		q.bytes += len(ev.Data)
	}
	q.mu.Unlock()
	q.poke()
}

func (q *execQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns what is queued, the drops since the last take after it,
// and whether the queue is closed.
func (q *execQueue) take() ([]jobctl.ExecEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs, q.bytes = nil, 0
	for k, n := range q.dropped {
		s, _ := strconv.Atoi(k[1])
		evs = append(evs, jobctl.ExecEvent{Host: k[0], Stream: s, Dropped: n})
		delete(q.dropped, k)
	}
	return evs, q.closed
}

func (q *execQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.poke()
}

// droppedOf is how many bytes of host's output were dropped here.
func (q *execQueue) droppedOf(host string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total[host]
}
