package actorrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/hostagent"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/jobview"
	"github.com/monarch-go/monarch/internal/wire"
)

// client is the runtime of a job's client: the program run directly or by
// a launcher, the root of the supervision tree. Besides what every
// runtime does it may run the job's bus (when there is no launcher),
// prints and records the procs' output, counts what is up for the job's
// record, collects the host agents a launcher started, runs the fault
// hook, and stops every proc mesh it started when it ends.
type client struct {
	*core                      // what every runtime has
	server   *bus.Server       // the embedded bus, when there is no launcher
	logs     *clientLogs       // the job's output
	record   *jobstate.Writer  // the job's record, when there is no launcher
	counts   *jobview.Counts   // procs and hosts up, for the record
	launched *launchedAgents   // the host agents a launcher started, or nil
	jobProcs []hostsconfig.Dim // the job file's [procs], from the launcher
	execOff  string            // where the job file turns monarch exec off (internal/jobview), or ""
	stopLogs context.CancelFunc

	faults    chan *MeshFailure // failures for the fault hook
	fatalCh   chan struct{}     // closed when the client must end (an unhandled failure)
	fatalErr  error
	fatalOnce sync.Once

	names *nameRegistry // the job's mesh names (names.go)
	// view is the client's view of its job (internal/jobview, jobside.go):
	// the model of the job feed tells, its control socket and dashboard.
	view *jobview.View
	feed jobModel // view's model, as the runtime tells it what it sees

	spawnedMu sync.Mutex
	spawned   []*ProcMesh // every proc mesh this client started, to stop at exit
	hostMesh  *ProcMesh   // the procs that are simulated hosts (HostsFromConfig), stopped last
	shutOnce  sync.Once
}

var _ role = (*client)(nil)

// client is rt's client, or nil if rt is a proc's.
func (rt *core) client() *client {
	c, _ := rt.role.(*client)
	return c
}

// runClient runs fn in the client and returns the exit status.
//
// Signals: SIGINT tears the job down at once (130). SIGTERM asks it to
// stop: the program's ctx is cancelled with a stop notice as its cause,
// every proc hears of it (Preempted), and the program has the stop grace
// to return before the procs are stopped; the status is then 143 (see
// exitCode). A second SIGTERM stops at once. SIGUSR1 warns of the time
// limit (a notice only).
func runClient(fn func(ctx context.Context) error, o options, env jobenv.Env) int {
	c, err := newClient(o, env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	grace := env.StopGrace
	if grace <= 0 {
		grace = hostsconfig.DefaultStopGrace
	}
	code, stopped := 0, false
	var failed error // what the client ends with, unless stopped
	var graceOver <-chan time.Time
wait:
	for {
		select {
		case err := <-done:
			code, failed = exitCode(err, stopped, context.Cause(ctx)), err
			break wait
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGUSR1:
				c.announce(PreemptNotice{Reason: "time limit", Deadline: env.JobEnd})
			case sig == syscall.SIGTERM && !stopped:
				stopped = true
				deadline := time.Now().Add(grace)
				if !env.JobEnd.IsZero() && env.JobEnd.Before(deadline) {
					// Never more than the scheduler gives.
					deadline, grace = env.JobEnd, max(time.Until(env.JobEnd), 0)
				}
				n := &PreemptNotice{Reason: "stop requested (SIGTERM)", Deadline: deadline, Stop: true}
				c.announce(*n)
				cancel(n)
				graceOver = time.After(grace)
			default:
				// Ctrl-C, or a second SIGTERM: do not wait for fn, which
				// may ignore ctx. Tear down and leave.
				cancel(context.Canceled)
				code, stopped = 128+int(sig.(syscall.Signal)), true
				break wait
			}
		case <-graceOver:
			fmt.Fprintf(os.Stderr, "monarch: the program did not return within the stop grace (%v): stopping its procs\n", grace)
			code = 128 + int(syscall.SIGTERM)
			break wait
		case <-c.fatalCh:
			fmt.Fprintf(os.Stderr, "monarch: unhandled failure: %v\n", c.fatalErr)
			var mf *MeshFailure
			if !c.opts.hookSet && errors.As(c.fatalErr, &mf) {
				fmt.Fprintln(os.Stderr, defaultHookAdvice)
			}
			cancel(c.fatalErr)
			code, failed = 1, c.fatalErr
			break wait
		}
	}
	// The job is ending: from here on, procs and hosts end because the
	// client stops them, and what fails is not the program's to handle.
	c.closing.Store(true)
	var f *Failure
	if !stopped {
		f = c.failureOf(failed, code)
	}
	c.reportFailure(f)
	c.shutdown()
	c.finishJobRecord(code, stopped, f)
	return code
}

// exitCode is the status of a program that returned err. After a stop,
// a clean return (nil, ctx's error, or the notice) is 143, as for a
// process SIGTERM ended: the job did not finish, it was stopped.
func exitCode(err error, stopped bool, cause error) int {
	var exit *ExitError
	switch {
	case errors.As(err, &exit):
		if exit.Err != nil {
			fmt.Fprintf(os.Stderr, "error: %v\n", exit.Err)
		}
		return exit.Code
	case stopped && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, cause)):
		return 128 + int(syscall.SIGTERM)
	case err == nil:
		return 0
	}
	fmt.Fprintf(os.Stderr, "error: %v\n", err)
	return 1
}

// newClient starts the client of the job env describes: on the launcher's
// bus, or, run directly, on an embedded bus of its own.
func newClient(o options, env jobenv.Env) (*client, error) {
	job := env.Job
	if job == "" {
		id, err := jobstate.NewID()
		if err != nil {
			return nil, fmt.Errorf("actorrt: %w", err)
		}
		job = id
	}
	rt, err := newRuntime(job, jobenv.ClientID, env, o, "client")
	if err != nil {
		return nil, err
	}
	c := &client{core: rt, jobProcs: env.Procs, execOff: env.ExecOff, faults: make(chan *MeshFailure, 4096), fatalCh: make(chan struct{})}
	c.names = newNameRegistry(c)
	jobstate.PruneSystemLogs(time.Now())
	if env.Bus.URL == "" && !o.unlisted {
		c.openJobRecord() // no launcher: the record is ours to keep
	}
	if err := c.connect(env); err != nil {
		c.finishJobRecord(1, false, &Failure{Summary: err.Error(), Rank: -1, Exit: 1})
		rt.logFile.Close()
		return nil, err
	}
	return c, nil
}

// clientTransit: every proc answers the client, at once for a whole-mesh
// call, so its link takes in a burst as long as its queue even while it
// waits for a CPU (one process: 2 MB).
const clientTransit = bus.DefaultQueueLen

// connect connects the client to its job's bus and starts its runtime.
func (c *client) connect(env jobenv.Env) error {
	var conn *bus.Conn
	if env.Bus.URL != "" {
		// Under `monarch local` or `monarch run`: the bus is theirs.
		jobenv.UnsetSecret()
		var err error
		conn, err = bus.Connect(env.Bus.URL, bus.ConnOptions{Name: "client", Token: env.Bus.Token, TLS: hostagent.ClientTLS(env.Bus),
			HubServers: env.Bus.Hubs, MaxMessage: c.opts.maxMessage, OnError: c.busFault, Transit: clientTransit,
			ReconnectFor: c.opts.hostTimeout, OnLink: c.linkChanged, ConnectFor: busConnectFor})
		if err != nil {
			return fmt.Errorf("actorrt: client: %w", err)
		}
	} else {
		// The job's hub: simulated hosts (HostsFromConfig) link their
		// leaves to it; this client's own procs dial it directly.
		srv, err := bus.StartServer(bus.ServerOptions{Leaves: &bus.Listen{}})
		if err != nil {
			return fmt.Errorf("actorrt: client: %w", err)
		}
		conn, err = bus.ConnectInProcess(srv, bus.ConnOptions{Name: "client", MaxMessage: c.opts.maxMessage, OnError: c.busFault, Transit: clientTransit})
		if err != nil {
			srv.Shutdown()
			return fmt.Errorf("actorrt: client: %w", err)
		}
		c.server = srv
		c.bus = jobenv.Bus{URL: srv.URL(), Token: srv.Token(), Leaf: srv.LeafURL()}
	}
	if err := c.start(env, busLink{conn}); err != nil {
		c.shutdown()
		return err
	}
	return nil
}

// start starts the runtime, then what only the client does.
func (c *client) start(env jobenv.Env, l link) error {
	// What the dispatcher reads (take) is set before it starts.
	c.startCounting()
	c.logs = newClientLogs(c, env)
	c.startView()
	if env.HostAgents > 0 {
		c.launched = openLaunchedAgents(c.core, env.HostAgents)
	}
	if err := c.core.start(l, c); err != nil {
		return err
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	c.stopLogs = stopLogs
	go c.logs.run(logCtx)
	go c.hookLoop()
	// Every proc's end: for the counts, and the client holds most procs.
	subjects := []string{c.subjects.Log(), c.subjects.Up(), c.subjects.DeathsPrefix() + "*"}
	if c.launched != nil {
		subjects = append(subjects, c.subjects.AgentGonePrefix()+"*")
	}
	for _, s := range subjects {
		if _, err := l.Subscribe(s); err != nil {
			return fmt.Errorf("actorrt: client: %w", err)
		}
	}
	// The bus has the subscriptions before the program runs: the lines
	// it writes first, which its launcher publishes as the client's, are
	// not published to nobody.
	ctx, cancel := context.WithTimeout(context.Background(), busConnectFor)
	defer cancel()
	if err := l.Flush(ctx); err != nil {
		return fmt.Errorf("actorrt: client: %w", err)
	}
	if err := c.serveView(env); err != nil {
		return err
	}
	if c.launched != nil {
		return c.launched.ask() // after the inbox SUB: the answers can come
	}
	return nil
}

// take handles the client's own subjects: the procs' lines, procs coming
// up, and host agents the launcher saw end.
func (c *client) take(m bus.Message) bool {
	switch {
	case m.Subject == c.subjects.Log():
		c.logs.receive(m.Data)
	case m.Subject == c.subjects.Up():
		c.counts.Up(m.Data)
	case c.launched != nil && strings.HasPrefix(m.Subject, c.subjects.AgentGonePrefix()):
		// The launcher saw an agent's process end: no need to wait for
		// its heartbeats to stop.
		agent := strings.TrimPrefix(m.Subject, c.subjects.AgentGonePrefix())
		if wire.ValidID(agent) {
			c.health.gone(wire.GoneNotice{Proc: agent, Reason: "host agent ended: " + string(m.Data), Status: -1}, true)
		}
	default:
		return false
	}
	return true
}

// unhandled passes f to the fault hook, in order, off the dispatcher.
func (c *client) unhandled(f *MeshFailure) {
	select {
	case c.faults <- f:
	default:
		// The hook is far behind; this failure is not lost: it is fatal.
		c.fatal(fmt.Errorf("actorrt: too many unhandled failures; the last: %w", f))
	}
}

// hookLoop runs the fault hook for each failure that reaches the client.
func (c *client) hookLoop() {
	for {
		select {
		case f := <-c.faults:
			if c.closing.Load() {
				// The program has returned: it asks nothing of the
				// hook any more, and an end found now is most likely
				// the job's own stop.
				c.log.Info().Str("failure", f.Error()).Msg("not given to the fault hook: the job is ending")
				continue
			}
			if err := callHook(c.opts.faultHook, f); err != nil {
				if f.GoesOn {
					// News of a mesh that goes on without a member, not an end.
					c.log.Warn().Str("failure", f.Error()).Msg("a mesh goes on without a member")
					continue
				}
				c.fatal(err)
			}
		case <-c.ctx.Done():
			return
		}
	}
}

func callHook(hook func(*MeshFailure) error, f *MeshFailure) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the fault hook panicked: %v (on %w)", r, f)
		}
	}()
	return hook(f)
}

// fatal ends the client: Main prints err and exits 1.
func (c *client) fatal(err error) {
	c.fatalOnce.Do(func() {
		c.fatalErr = err
		close(c.fatalCh)
	})
}

func (c *client) procEnded(n wire.GoneNotice) {
	c.counts.Gone(n.Proc)
	c.names.procEnded(n)
	if n.Stopped || n.Status == 0 {
		c.logs.takeTail(n.Proc) // nothing failed: nobody will ask
	}
}

func (c *client) procsStarted(pm *ProcMesh) {
	c.spawnedMu.Lock()
	c.spawned = append(c.spawned, pm)
	c.spawnedMu.Unlock()
}

func (c *client) linesArrived() { c.logs.flush() }

// watchSubjects: the client hears every end already (all the deaths
// subjects).
func (c *client) watchSubjects(string) []string { return nil }

// ownSubjects: the client sends the notices; it subscribes to its own
// subjects in start.
func (c *client) ownSubjects() []string { return nil }

// root: the client is the root of the supervision tree.
func (c *client) root() bool { return true }

// registry: the client keeps the job's names.
func (c *client) registry() nameService { return clientNames{c.names} }

// meshName: procs1, procs2, ...
func (c *client) meshName(seq uint64) string { return "procs" + strconv.FormatUint(seq, 10) }

// shutdown stops the procs this client started (through their agents:
// their last lines arrive before the agents' replies), prints the last
// lines, then stops the runtime and the embedded bus. Idempotent.
func (c *client) shutdown() {
	c.shutOnce.Do(func() {
		c.closing.Store(true)
		if c.view != nil {
			c.view.Close() // first: the job is ending, nothing more to ask
		}
		if c.link != nil {
			c.logs.endOutput() // the program's last lines are in the log
			c.stopSpawned()
			c.logs.flush()
			c.stopLogs()
			<-c.logs.done
			c.stop()
		}
		if c.server != nil {
			c.server.Shutdown()
		}
		c.logFile.Close()
	})
}

// stopSpawned stops every proc mesh this client started (it returns when
// their agents have confirmed, or the stop timeout has passed).
func (c *client) stopSpawned() {
	c.spawnedMu.Lock()
	pms, hosts := c.spawned, c.hostMesh
	c.spawned = nil
	c.spawnedMu.Unlock()
	// The procs on simulated hosts first: their agents answer the stop
	// only while their hosts live.
	var wg sync.WaitGroup
	for _, pm := range pms {
		if pm == hosts {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); pm.Stop(context.Background()) }()
	}
	wg.Wait()
	if hosts != nil && slices.Contains(pms, hosts) {
		hosts.Stop(context.Background())
	}
}

// The client asks the host agents that have not reported again after
// askAgentsFirst, then twice as long each time, up to askAgentsMax.
const (
	askAgentsFirst = 50 * time.Millisecond
	askAgentsMax   = time.Second
)

// launchedAgents collects, at the client, the reports of the host agents
// a launcher started: they become the HostMesh HostsFromConfig returns.
type launchedAgents struct {
	rt  *core
	fut *Future[ValueMesh[wire.ProcReady]]
	n   int
}

// openLaunchedAgents opens the port every agent reports to.
func openLaunchedAgents(rt *core, n int) *launchedAgents {
	ext, _ := NewExtent(Dims{{"hosts", n}})
	la := &launchedAgents{rt: rt, n: n, fut: newFuture[ValueMesh[wire.ProcReady]](label{mesh: "host agents"})}
	waits := make([]string, n)
	for i := range waits {
		waits[i] = jobenv.AgentID(i)
	}
	rt.ports.openAt(wire.AgentsPort, newCallPort[wire.ProcReady](la.fut, ext), waits)
	return la
}

// ask asks every agent of the job to report.
func (la *launchedAgents) ask() error {
	return la.rt.sendControlOn(la.rt.subjects.Agents(), wire.OpAgentsHello, 0, nil)
}

// hosts returns the HostMesh of the agents, once all have reported
// (bounded by the spawn timeout and ctx).
func (la *launchedAgents) hosts(ctx context.Context) (*HostMesh, error) {
	ctx, cancel := context.WithTimeout(ctx, la.rt.opts.spawnTimeout)
	defer cancel()
	// Ask again while some have not reported: an agent on a leaf can
	// report before this client's inbox is known on its leaf, while its
	// interest in the question is still on its way to the hub; then
	// both cross on the link, and neither arrives.
	wait := askAgentsFirst
	for waiting := true; waiting; {
		again := time.NewTimer(wait)
		select {
		case <-la.fut.Done():
			waiting = false
		case <-ctx.Done():
			waiting = false
		case <-again.C:
			la.ask()
			wait = min(2*wait, askAgentsMax)
		}
		again.Stop()
	}
	ready, err := la.fut.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("actorrt: waiting for %d host agents: %w", la.n, err)
	}
	hosts := make([]hostInfo, la.n)
	infos := make([]procInfo, la.n)
	for i, r := range ready.Values() {
		id := jobenv.AgentID(i)
		hosts[i] = hostInfo{Agent: id, Name: r.Host}
		infos[i] = procInfo{ID: id, Host: r.Host, PID: r.PID, Agent: id}
	}
	la.rt.health.started(infos, true) // the launcher tells of an agent that ends
	return &HostMesh{rt: la.rt, reg: wholeRegion(ready.Extent()), hosts: hosts}, nil
}
