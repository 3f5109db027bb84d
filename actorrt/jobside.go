package actorrt

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobview"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
)

// The client's side of internal/jobview: the client tells its model of
// the job what it sees (jobModel: heartbeats, meshes registered and
// stopped, what its supervision saw), and answers the view's questions
// (jobSide: what it knows now, the procs' figures, stacks and profiles,
// commands on the job's hosts). The view serves the control socket
// (`monarch stacks`, `profile`, `exec`, `status --watch`...) and the
// dashboard.

// DefaultStacksTimeout is how long `monarch stacks` waits for the procs'
// answers unless told.
const DefaultStacksTimeout = jobview.DefaultStacksTimeout

// jobModel is what the client tells its model of the job: Step runs fn
// on the model under its lock (jobview.View).
type jobModel interface {
	Step(fn func(*jobview.Model))
}

// startView makes the client's view of its job: events reach its model
// from now on; serveView serves it.
func (c *client) startView() {
	c.sent.keepAll = true // the model reads the client's counts
	c.view = jobview.New(jobview.Config{Job: c.job, Proc: c.procID, Host: c.hostLabel, StateDir: hostsconfig.StateDir(),
		ExecOff: c.execOff, Stderr: c.logs.stderr, Warn: func(err error, msg string) { c.log.Warn().Err(err).Msg(msg) }}, jobSide{c})
	c.feed = c.view
}

// serveView starts the job's dashboard (on the address the job file's
// [dashboard] or $MONARCH_DASHBOARD gives) and its control socket. A
// configured dashboard address that cannot be had fails the job's start.
func (c *client) serveView(env jobenv.Env) error {
	addr, where := env.Dashboard, env.DashboardAt
	if addr != "" && where == "" {
		where = "$" + jobenv.DashboardVar
	}
	if err := c.view.Serve(addr, where); err != nil {
		return fmt.Errorf("actorrt: %w", err)
	}
	return nil
}

// heardAgent tells the model of a heartbeat of agent.
func (c *client) heardAgent(agent string) {
	now := time.Now()
	c.feed.Step(func(m *jobview.Model) { m.Heard(agent, now) })
}

// feedMeshAdded tells the model of a mesh registered with the client.
func (c *client) feedMeshAdded(w actorMeshWire) {
	reg, err := w.Region.region(len(w.Procs))
	if err != nil {
		return
	}
	mesh := jobview.Mesh{ID: w.ID, Name: w.Name, Type: shortName(w.Type), Owner: w.Owner, Procs: w.Procs, Extent: extentOf(reg.extent())}
	c.feed.Step(func(m *jobview.Model) { m.MeshAdded(mesh) })
}

// feedMeshStopped tells the model of the stop of mesh id; the counts of
// a mesh it forgets are forgotten too.
func (c *client) feedMeshStopped(id string) {
	c.feed.Step(func(m *jobview.Model) {
		if forgot := m.MeshStopped(id); forgot != "" {
			c.sent.forget(forgot)
		}
	})
}

// supervised tells the model what the client's supervision saw: one
// event and the effects the router asked for, in order.
func (c *client) supervised(ev routerEvent, effects []routerEffect) {
	now := time.Now()
	c.feed.Step(func(m *jobview.Model) {
		switch ev := ev.(type) {
		case evMemberFailed:
			m.Failed(now, viewFailure(ev.f))
		case evProcEnded:
			m.ProcEnded(now, ev.n.Proc, ev.n.Reason, ev.n.Stopped)
		case evMoved:
			m.Moved(ev.id, ev.ranks, ev.proc)
		case evRestartDone:
			failed := make([]jobview.Failure, 0, len(ev.failed)+len(ev.final))
			for _, f := range slices.Concat(ev.failed, ev.final) {
				failed = append(failed, viewFailure(f))
			}
			m.RestartDone(ev.id, ev.ranks, failed)
		}
		for _, e := range effects {
			switch e := e.(type) {
			case effUnhandled:
				m.Unhandled(now, viewFailure(e.f))
			case effSupervise:
				m.Supervising(viewFailure(e.f))
			case effRestart:
				m.Restarting(now, e.id, e.ranks, viewFailure(e.f))
			case effGiveUp:
				m.GaveUp(now, e.id, e.ranks, e.reason)
			}
		}
	})
}

func viewFailure(f *MeshFailure) jobview.Failure {
	return jobview.Failure{MeshID: f.MeshID, Mesh: f.Mesh, Base: f.Base, ActorID: f.ActorID, Proc: f.Proc, Reason: f.Reason}
}

func extentOf(e Extent) jobctl.Extent {
	out := jobctl.Extent{}
	for _, d := range e.dims {
		out = append(out, jobctl.Dim{Name: d.Name, Size: d.Size})
	}
	return out
}

// jobSide is the running job as the client's view asks it.
type jobSide struct{ c *client }

var _ jobview.Job = jobSide{}

func (j jobSide) Live() jobview.Live {
	c := j.c
	l := jobview.Live{At: time.Now(), Job: c.job, Counting: feedOn,
		Client: jobctl.ProcState{Proc: jobenv.ClientID, Host: c.hostLabel, PID: os.Getpid()},
		Gone: func(id string) (jobview.Gone, bool) {
			n, gone := c.health.notice(id)
			return jobview.Gone{Reason: n.Reason, Stopped: n.Stopped}, gone
		},
		HostOf: c.counts.HostOf, Sent: c.sent.to}
	c.spawnedMu.Lock()
	pms := slices.Clone(c.spawned)
	c.spawnedMu.Unlock()
	for _, pm := range pms {
		vm := jobview.ProcMesh{Name: pm.name, Extent: extentOf(pm.Extent()), Command: pm.command, Replaces: pm.replaces}
		for _, p := range pm.procs {
			vm.Procs = append(vm.Procs, jobview.Proc{ID: p.ID, Host: p.Host, Agent: p.Agent, PID: p.PID})
		}
		l.ProcMeshes = append(l.ProcMeshes, vm)
	}
	l.Logs, l.LogLines = c.logs.recentLines()
	return l
}

func (j jobSide) Figures(ctx context.Context, proc string) (jobview.Figures, error) {
	if proc == "" {
		return j.c.actors.figures(), nil
	}
	return askInspector[jobview.Figures](ctx, j.c.core, proc, "Figures")
}

func (j jobSide) Stacks(ctx context.Context, proc string) (jobview.Stacks, error) {
	if proc == "" {
		return j.c.actors.stacks(), nil
	}
	return askInspector[jobview.Stacks](ctx, j.c.core, proc, "Stacks")
}

func (j jobSide) Profile(ctx context.Context, proc string, args jobview.ProfileArgs) ([]byte, error) {
	if proc == "" {
		return takeProfile(ctx, &j.c.profiling, args)
	}
	return askInspector[[]byte](ctx, j.c.core, proc, "Profile", args)
}

// ExecHosts lists the job's hosts: the agents a launcher started (one a
// host: h0, h1, ... under `monarch local --hosts N`; the nodes' names
// under Slurm or ssh), waiting a little for them to have reported, then
// the client's own host, through the client's own agent, unless an agent
// of the launcher has its name.
func (j jobSide) ExecHosts(ctx context.Context) ([]jobview.ExecHost, error) {
	c := j.c
	var out []jobview.ExecHost
	if la := c.launched; la != nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ready, err := la.fut.Get(ctx)
		if err != nil {
			return nil, fmt.Errorf("the job's %d host agents have not all reported (yet): %v", la.n, err)
		}
		for i, r := range ready.Values() {
			out = append(out, jobview.ExecHost{Name: r.Host, Agent: jobenv.AgentID(i)})
		}
	}
	if !slices.ContainsFunc(out, func(h jobview.ExecHost) bool { return h.Name == c.hostLabel }) {
		out = append(out, jobview.ExecHost{Name: c.hostLabel, Agent: c.procID})
	}
	return out, nil
}

func (j jobSide) Exec(agent string, xr wire.ExecReq, out jobview.ExecSink) (string, func(), error) {
	c := j.c
	port, err := c.ports.open(execPort{out}, []string{agent})
	if err != nil {
		return "", nil, err
	}
	xr.ID = "x" + strconv.FormatUint(port, 10)
	return xr.ID, func() { c.ports.close(port) }, c.sendControl(agent, wire.OpExec, port, &xr)
}

func (j jobSide) StopExec(agent, id string) error {
	return j.c.sendControl(agent, wire.OpExecStop, 0, &wire.ExecStopReq{ID: id})
}

func (j jobSide) AgentGone(agent string) error { return j.c.health.goneErr(agent) }

// execPort receives the events of one host's command, on the client's
// dispatcher.
type execPort struct{ out jobview.ExecSink }

func (p execPort) deliver(rt *core, f *wire.Frame) bool {
	var ev wire.ExecEvent
	if err := decodeReply(rt, f, &ev); err != nil {
		p.out.Broken("its host agent answered with an error: " + err.Error())
		return false
	}
	return p.out.Output(ev)
}

func (p execPort) fail(err error) { p.out.Broken("lost: " + err.Error()) }

// recentLines is the last lines received, oldest first, and how many
// there were in all.
func (l *clientLogs) recentLines() ([]jobctl.LogLine, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(l.nRecent, jobctl.MaxLogLines)
	out := make([]jobctl.LogLine, 0, n)
	for i := l.nRecent - n; i < l.nRecent; i++ {
		ln := &l.recent[i%jobctl.MaxLogLines]
		stream := "stdout"
		if ln.Stream == logagg.Stderr {
			stream = "stderr"
		}
		out = append(out, jobctl.LogLine{At: ln.Time, Proc: ln.Proc, Stream: stream, Text: ln.Text})
	}
	return out, l.lines.Load()
}
