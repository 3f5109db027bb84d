package actorrt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"
)

// The environment a proc is started with. MONARCH_PROC marks worker mode.
const (
	envJob       = bus.EnvJob
	envProc      = "MONARCH_PROC"
	envBusURL    = bus.EnvURL
	envBusToken  = bus.EnvToken
	envParent    = "MONARCH_PARENT"
	envReadyPort = "MONARCH_READY_PORT"
	envReadyRank = "MONARCH_READY_RANK"
)

// clientProcID is the proc id of the client, the root of every job.
const clientProcID = "c"

// runtimeT is this process's part of the job: its bus connection, its
// proc (the actors it hosts and its ports) and its host agent.
type runtimeT struct {
	job      string
	procID   string
	hostname string // this machine's name (what procs dial, MASTER_ADDR)
	// hostLabel is what lines and messages call this host: hostname, or
	// a simulated host's name (h0, h1, ...).
	hostLabel string
	busURL    string // what procs started from here dial
	token     string
	opts      options
	log       zerolog.Logger
	logFile   io.Closer

	conn   *bus.Conn
	server *bus.Server // the embedded server, when this process owns it

	ports  portTable
	drops  wire.Drops       // malformed messages dropped, by kind (drops.go)
	agents agentWait        // the agents a launcher started (client)
	logs   *clientLogs      // the job's output (client)
	record *jobstate.Writer // the job's record, when there is no launcher (client)
	counts *jobCounts       // procs and hosts up, for the record (client)

	spawnedMu sync.Mutex
	spawned   []*ProcMesh // every proc mesh this client started, to stop at exit
	health    health
	local     *procState // actors and meshes hosted here; owned by the dispatcher
	host      *hostAgent
	meshSeq   atomic.Uint64
	procSeq   atomic.Uint64

	owned     sync.Map          // mesh id -> *ownership: meshes spawned here
	faults    chan *MeshFailure // failures for the fault hook (client)
	fatalCh   chan struct{}     // closed when the client must end (an unhandled failure)
	fatalErr  error
	fatalOnce sync.Once

	procSubject   string
	logSubj       string
	upSubj        string          // procs announce themselves here (client)
	agentGoneSubj string          // prefix: JobSubject(job, agentgone) + "."
	ctx           context.Context // ends when the runtime shuts down
	cancel        context.CancelFunc
	dispatchEnd   chan struct{} // closed when the dispatcher returns
	agentIndex    int           // a host agent's index in the job
	agentMode     bool          // a `monarch agent`: heartbeats from the start
	exitCode      atomic.Int32  // a worker's exit status: 0 once asked to stop (SIGTERM)
	closing       atomic.Bool   // shutdown has begun: procs ending now is expected
	stopLogs      context.CancelFunc
	shutOnce      sync.Once
}

var current atomic.Pointer[runtimeT]

func getRuntime() (*runtimeT, error) {
	if rt := current.Load(); rt != nil {
		return rt, nil
	}
	return nil, ErrNotStarted
}

// Option configures Main.
type Option func(*options) error

type options struct {
	spawnTimeout time.Duration
	stopTimeout  time.Duration
	hostTimeout  time.Duration
	maxMessage   int // 0: the bus's default
	faultHook    func(*MeshFailure) error
}

func defaultOptions() options {
	return options{spawnTimeout: 60 * time.Second, stopTimeout: 5 * time.Second, hostTimeout: 5 * time.Second,
		faultHook: defaultFaultHook}
}

// WithHostTimeout sets how long a host agent may be silent before its
// host is declared lost and its procs failed. Default 5s; heartbeats are
// sent every second.
func WithHostTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 2*heartbeatInterval {
			return fmt.Errorf("actorrt: host timeout %v must be at least %v", d, 2*heartbeatInterval)
		}
		o.hostTimeout = d
		return nil
	}
}

// WithSpawnTimeout bounds how long SpawnProcs waits for new procs to be
// ready and Spawn waits for every actor's Init. Default 60s.
func WithSpawnTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("actorrt: spawn timeout %v must be positive", d)
		}
		o.spawnTimeout = d
		return nil
	}
}

// WithMaxMessage sets the largest message this process sends and takes:
// a call's arguments, a reply, a value sent to a port. A larger one is
// refused at once with ErrTooLarge, the limit in the error, without being
// copied. Default bus.DefaultMaxMessage (1 GiB). Every process of the job
// must agree (a receiver drops a message over its own limit); procs that
// run this program's Main with the same options do.
func WithMaxMessage(bytes int) Option {
	return func(o *options) error {
		if bytes < 64<<10 {
			return fmt.Errorf("actorrt: max message %d must be at least 64 KiB", bytes)
		}
		o.maxMessage = bytes
		return nil
	}
}

// WithStopTimeout bounds how long a stopping proc is given to exit before
// it is killed. Default 5s.
func WithStopTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("actorrt: stop timeout %v must be positive", d)
		}
		o.stopTimeout = d
		return nil
	}
}

// Main runs the program and exits the process with its status; it does
// not return.
//
// Started directly (or by `monarch local`/`monarch run`), the process is
// the client: Main connects to the job's bus (starting an embedded,
// loopback-only one when there is none), runs fn, then stops every proc it
// started and exits 0, or 1 if fn returned an error (printed to stderr).
// SIGINT or SIGTERM cancels fn's ctx, tears the job down and exits 130 (or
// 143).
//
// Started as a proc of a job (by SpawnProcs, in the same binary), Main
// serves actors and never calls fn. Register every actor type before Main.
func Main(fn func(ctx context.Context) error, opts ...Option) {
	os.Exit(Run(fn, opts...))
}

// Run is Main without the exit: it returns the exit status. It suits a
// TestMain, which must run its tests inside the client and exit with their
// status: os.Exit(actorrt.Run(...)).
func Run(fn func(ctx context.Context) error, opts ...Option) int {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if IsProc() {
		return runWorker(o)
	}
	return runClient(fn, o)
}

// IsProc reports whether this process was started as a proc of a job (in
// worker mode) rather than as a client.
func IsProc() bool { return os.Getenv(envProc) != "" }

// openSystemLog points rt.log at the job's system log for role (see
// logagg.SystemLogger): a file under /tmp/$USER, and stderr for warnings.
func (rt *runtimeT) openSystemLog(role string) error {
	l, closer, err := logagg.SystemLogger(rt.job, role)
	if err != nil {
		return fmt.Errorf("actorrt: %w", err)
	}
	rt.log, rt.logFile = l, closer
	return nil
}

func runClient(fn func(ctx context.Context) error, o options) int {
	rt, err := startClient(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(rt.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	code, stopped := 0, false
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "error: %v\n", err)
			code = 1
		}
	case sig := <-sigs:
		// Do not wait for fn: it may ignore ctx. Tear down and leave.
		cancel()
		code, stopped = 128+int(sig.(syscall.Signal)), true
	case <-rt.fatalCh:
		printUnhandled(rt.fatalErr)
		cancel()
		code = 1
	}
	rt.shutdown()
	rt.finishJobRecord(code, stopped)
	return code
}

func startClient(o options) (*runtimeT, error) {
	hostname, _ := os.Hostname()
	rt := &runtimeT{procID: clientProcID, hostname: hostname, hostLabel: hostLabel(hostname), opts: o}
	rt.job = os.Getenv(envJob)
	if rt.job == "" {
		id, err := jobstate.NewID()
		if err != nil {
			return nil, fmt.Errorf("actorrt: %w", err)
		}
		rt.job = id
	}
	if err := rt.openSystemLog("client"); err != nil {
		return nil, err
	}
	pruneSystemLogs()
	if os.Getenv(envBusURL) == "" {
		rt.openJobRecord() // no launcher: the record is ours to keep
	}
	if err := rt.connectClient(); err != nil {
		rt.finishJobRecord(1, false)
		return nil, err
	}
	return rt, nil
}

// connectClient connects the client to its job's bus and starts its
// runtime.
func (rt *runtimeT) connectClient() error {
	if url := os.Getenv(envBusURL); url != "" {
		// Under `monarch local` or `monarch run`: the bus is theirs.
		rt.busURL, rt.token = url, os.Getenv(envBusToken)
		os.Unsetenv(envBusToken)
		conn, err := bus.Connect(url, tlsOptions(bus.ConnOptions{Name: "client", Token: rt.token, MaxMessage: rt.opts.maxMessage, OnError: rt.busFault}))
		if err != nil {
			return fmt.Errorf("actorrt: client: %w", err)
		}
		rt.conn = conn
	} else {
		srv, err := bus.StartServer(bus.ServerOptions{})
		if err != nil {
			return fmt.Errorf("actorrt: client: %w", err)
		}
		conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "client", MaxMessage: rt.opts.maxMessage, OnError: rt.busFault})
		if err != nil {
			srv.Shutdown()
			return fmt.Errorf("actorrt: client: %w", err)
		}
		rt.server, rt.conn, rt.busURL, rt.token = srv, conn, srv.URL(), srv.Token()
	}
	if err := rt.start(); err != nil {
		rt.shutdown()
		return err
	}
	return nil
}

// start subscribes the proc's inbox and runs the dispatcher.
func (rt *runtimeT) start() error {
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	rt.faults = make(chan *MeshFailure, 4096)
	rt.fatalCh = make(chan struct{})
	rt.local = newProcState(rt)
	if err := rt.local.startSystemActor(); err != nil {
		return err
	}
	rt.host = newHostAgent(rt)
	rt.host.started.Store(rt.agentMode) // the client watches agents from the start
	rt.procSubject = rt.procSubjectOf(rt.procID)
	rt.logSubj = rt.logSubject()
	rt.agentGoneSubj = bus.JobSubject(rt.job, bus.SubjectAgentGone) + "."
	for _, subj := range []string{rt.procSubject, rt.deathsSubject()} {
		if _, err := rt.conn.Subscribe(subj); err != nil {
			return fmt.Errorf("actorrt: proc %s: %w", rt.procID, err)
		}
	}
	if rt.procID == clientProcID {
		rt.upSubj = bus.JobSubject(rt.job, bus.SubjectUp)
		rt.startCounting() // before the dispatcher, which reads rt.counts
	}
	rt.dispatchEnd = make(chan struct{})
	current.Store(rt)
	go rt.dispatchLoop()
	if rt.procID == clientProcID {
		if err := rt.openAgentsPort(); err != nil {
			return err
		}
		if rt.agents.fut != nil {
			if _, err := rt.conn.Subscribe(rt.agentGoneSubj + "*"); err != nil {
				return err
			}
		}
		go rt.hookLoop()
		rt.logs = newClientLogs(rt)
		if _, err := rt.conn.Subscribe(rt.logSubject()); err != nil {
			return err
		}
		logCtx, stopLogs := context.WithCancel(context.Background())
		rt.stopLogs = stopLogs
		go rt.logs.run(logCtx)
		if _, err := rt.conn.Subscribe(rt.upSubj); err != nil {
			return err
		}
	}
	go rt.heartbeats()
	go rt.watchAgents()
	if rt.agents.fut != nil {
		return rt.askAgents() // after the inbox SUB: the answers can come
	}
	return nil
}

func (rt *runtimeT) dispatchLoop() {
	defer close(rt.dispatchEnd)
	err := rt.conn.Run(rt.ctx, rt.dispatch)
	if errors.Is(err, bus.ErrClosed) {
		rt.ports.failAll(fmt.Errorf("%w: proc %s lost its bus connection", ErrBus, rt.procID))
		rt.local.stopAll()
		rt.cancel()
	}
}

// busFault is called by the bus for dropped messages and a lost link.
// A message lost to a full queue, or a lost link, breaks the delivery
// promise, so this proc stops trusting the bus: every waiting call fails
// now, and the dispatcher ends. A malformed message the bus dropped is no
// fault of the link: the bus reports the first of each kind, and it is
// logged like the dispatcher's own drops.
func (rt *runtimeT) busFault(err error) {
	var de *bus.DropError
	if errors.As(err, &de) {
		rt.log.Warn().Err(err).Str("drop", "bus-"+de.Kind.String()).Str("subject", de.Subject).
			Msg("dropped a malformed message; later ones of this kind are counted, not logged")
		return
	}
	rt.log.Error().Err(err).Str("proc", rt.procID).Msg("bus fault")
	rt.ports.failAll(fmt.Errorf("%w: proc %s: %v", ErrBus, rt.procID, err))
	if errors.Is(err, bus.ErrSlowConsumer) {
		go rt.conn.Close()
	}
}

func (rt *runtimeT) procSubjectOf(proc string) string { return "mon." + rt.job + ".proc." + proc }
func (rt *runtimeT) meshSubjectOf(mesh string) string { return "mon." + rt.job + ".mesh." + mesh }

func (rt *runtimeT) newMeshID() string {
	return rt.procID + ".m" + strconv.FormatUint(rt.meshSeq.Add(1), 10)
}

func (rt *runtimeT) newProcID() string {
	return rt.procID + "-" + strconv.FormatUint(rt.procSeq.Add(1), 10)
}

// dispatch routes one message, on the dispatcher goroutine, in wire order.
func (rt *runtimeT) dispatch(m bus.Message) {
	if rt.logs != nil && len(m.Subject) == len(rt.logSubj) && m.Subject == rt.logSubj {
		rt.logs.receive(m.Data)
		return
	}
	if rt.counts != nil && m.Subject == rt.upSubj {
		rt.counts.up(m.Data)
		return
	}
	if agent, ok := strings.CutPrefix(m.Subject, rt.agentGoneSubj); ok && rt.agents.fut != nil {
		// The launcher saw an agent's process end: no need to wait for
		// its heartbeats to stop.
		n := wire.GoneNotice{Proc: agent, Reason: "host agent ended: " + string(m.Data)}
		rt.procGone(n)
		rt.announceGone(n)
		return
	}
	f, err := wire.Parse(m.Data)
	if err != nil {
		rt.drop(wire.DropFrame, m.Subject, err)
		return
	}
	switch f.Kind {
	case wire.KindActor:
		rt.local.deliver(f, m.Subject)
	case wire.KindPort:
		// A copy, so that only this path pays for a frame on the heap.
		pf := f
		h := rt.ports.get(pf.Port)
		if h == nil {
			rt.undeliverable(&pf, m.Subject)
		} else if !h.deliver(&pf) {
			rt.ports.close(pf.Port)
		}
	case wire.KindControl:
		cf := f
		rt.local.control(&cf, m.Subject)
	default:
		rt.drop(wire.DropKindOf, m.Subject, fmt.Errorf("a message of kind %d", f.Kind))
	}
}

// sendToPort sends a value (or, with wire.FlagError, a wireError) to a port.
// Every reply and every Port.Send goes through here. It fails at once for
// a port on a proc known to be gone, or a port known to be closed.
func (rt *runtimeT) sendToPort(to portRef, flags uint8, body func(*msgpack.Encoder) error) error {
	if err := rt.portUsable(to); err != nil {
		return err
	}
	if to.once {
		rt.answered(to)
	}
	h := wire.Header{Kind: wire.KindPort, Port: to.id, Rank: to.rank, Flags: flags, ReplyTo: rt.procID}
	w, err := rt.newFrame(&h)
	if err != nil {
		return err
	}
	defer w.Free()
	if err := body(w.Enc); err != nil {
		what := fmt.Sprintf("a value for %s#%d", to.proc, to.id)
		if tl := w.TooLarge(what, err); tl != nil {
			return tl
		}
		return fmt.Errorf("%w: encode %s: %v", ErrDecode, what, err)
	}
	return rt.publish(rt.procSubjectOf(to.proc), w.Bytes())
}

// sendErrorToPort sends err to a port.
func (rt *runtimeT) sendErrorToPort(to portRef, err error) error {
	we := toWireError(err)
	return rt.sendToPort(to, wire.FlagError, func(e *msgpack.Encoder) error { return e.Encode(&we) })
}

// sendControl sends a control op to a proc, with an optional reply port.
func (rt *runtimeT) sendControl(proc, op string, port uint64, body any) error {
	h := wire.Header{Kind: wire.KindControl, Method: op, Port: port, ReplyTo: rt.procID, Rank: -1}
	w, err := rt.newFrame(&h)
	if err != nil {
		return err
	}
	defer w.Free()
	if err := w.Enc.Encode(body); err != nil {
		if tl := w.TooLarge(op+" request", err); tl != nil {
			return tl
		}
		return fmt.Errorf("actorrt: encode %s: %w", op, err)
	}
	return rt.publish(rt.procSubjectOf(proc), w.Bytes())
}

// newFrame starts a frame that may not pass the bus's largest message.
func (rt *runtimeT) newFrame(h *wire.Header) (*wire.Writer, error) {
	return wire.NewFrame(h, rt.conn.MaxMessage())
}

func (rt *runtimeT) publish(subject string, data []byte) error {
	if err := rt.conn.Publish(subject, data); err != nil {
		if errors.Is(err, bus.ErrClosed) {
			return fmt.Errorf("%w: %v", ErrStopped, err)
		}
		return err
	}
	return nil
}

// shutdown stops the procs started from here, then the connection and the
// embedded server. Idempotent.
func (rt *runtimeT) shutdown() {
	rt.shutOnce.Do(func() {
		rt.closing.Store(true)
		// The procs this client started anywhere, through their agents:
		// their last lines arrive before the agents' replies.
		if rt.logs != nil {
			rt.stopSpawned()
			rt.logs.flush()
			rt.stopLogs()
			<-rt.logs.done
		}
		rt.local.stopAll()
		if rt.host != nil {
			rt.host.stopAll(rt.opts.stopTimeout)
		}
		if rt.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			rt.conn.Flush(ctx)
			cancel()
			rt.ports.failAll(fmt.Errorf("%w: runtime shut down", ErrStopped))
			rt.conn.Close()
		}
		if rt.cancel != nil {
			rt.cancel()
		}
		if rt.dispatchEnd != nil {
			<-rt.dispatchEnd
		}
		if rt.server != nil {
			rt.server.Shutdown()
		}
		if rt.logFile != nil {
			rt.logFile.Close()
		}
		current.CompareAndSwap(rt, nil)
	})
}

// tlsOptions adds the bus's TLS settings from the environment, which the
// launcher sets when the job's bus uses TLS.
func tlsOptions(o bus.ConnOptions) bus.ConnOptions {
	o.TLSCA, o.TLSName = os.Getenv(bus.EnvTLSCA), os.Getenv(bus.EnvTLSName)
	return o
}

// stopSpawned stops every proc mesh this client started (it returns when
// their agents have confirmed, or the stop timeout has passed).
func (rt *runtimeT) stopSpawned() {
	rt.spawnedMu.Lock()
	pms := rt.spawned
	rt.spawned = nil
	rt.spawnedMu.Unlock()
	var wg sync.WaitGroup
	for _, pm := range pms {
		wg.Add(1)
		go func() { defer wg.Done(); pm.Stop(context.Background()) }()
	}
	wg.Wait()
}
