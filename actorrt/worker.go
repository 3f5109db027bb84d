package actorrt

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/hostagent"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// worker is the runtime of a proc: this program started by a host agent
// (SpawnProcs) to serve actors. Besides what every runtime does, it tells
// its spawner it is ready, and it leaves when its agent asks (SIGTERM:
// exit 0) or when its bus connection is gone (exit 1).
type worker struct {
	*core    // what every runtime has
	exitCode atomic.Int32
	hostBus  *hostagent.HostBus // a simulated host's own bus, or nil
}

var _ role = (*worker)(nil)

// runWorker serves this process as a proc of a job until told to exit or
// until its bus connection is gone. It returns the exit status.
func runWorker(o options, env jobenv.Env) int {
	w, err := newWorker(o, env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "monarch proc %s: %v\n", env.Proc.ID, err)
		return 1
	}
	// The client owns Ctrl-C; a proc leaves when told to (SIGTERM from its
	// agent), or with its bus. A time-limit warning reaches it from the
	// client (Preempted), not as Slurm's SIGUSR1 to a step, which would
	// end it.
	signal.Ignore(syscall.SIGINT, syscall.SIGUSR1)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		w.exitCode.Store(0)
		// The actors' cleanups run while the bus is still up.
		w.actors.stopAll(w.endCause("was asked to stop (SIGTERM)"))
		w.cancel()
	}()
	<-w.dispatchEnd
	code := int(w.exitCode.Load())
	if code != 0 {
		fmt.Fprintf(os.Stderr, "monarch proc %s: bus connection lost, exiting\n", w.procID)
	}
	w.stop()
	if w.hostBus != nil {
		w.hostBus.Close()
	}
	w.logFile.Close()
	return code
}

// newWorker connects the proc env describes to its job's bus, starts its
// runtime and reports it ready to its spawner.
func newWorker(o options, env jobenv.Env) (*worker, error) {
	boot := env.Proc
	rt, err := newRuntime(env.Job, boot.ID, env, o, "proc-"+boot.ID)
	if err != nil {
		return nil, err
	}
	w := &worker{core: rt}
	w.exitCode.Store(1) // unless SIGTERM asks it to stop
	// The secret stays in the runtime; user code and its children do not
	// inherit it.
	jobenv.UnsetSecret()
	conn, err := w.connect(env, o)
	if err != nil {
		rt.logFile.Close()
		return nil, err
	}
	if err := rt.start(busLink{conn}, w); err != nil {
		conn.Close()
		if w.hostBus != nil {
			w.hostBus.Close()
		}
		rt.logFile.Close()
		return nil, err
	}
	if w.hostBus != nil {
		go w.watchHostBus()
	}
	if boot.Spare {
		// Idle until its agent hands it a slot (takeSlot), which it
		// then reports ready for.
		rt.spare.Store(true)
	} else {
		ready := wire.ProcReady{PID: os.Getpid(), Host: rt.hostname}
		// Sent after the inbox SUB on the same connection: once the spawner has
		// it, the server routes messages for this proc.
		to := portRef{proc: boot.Parent, id: boot.ReadyPort, rank: boot.ReadyRank}
		if err := rt.sendToPort(to, 0, func(e *msgpack.Encoder) error { return e.Encode(&ready) }); err != nil {
			w.stop()
			rt.logFile.Close()
			return nil, err
		}
		// For the client's counts (see jobrecord.go) and the launcher's
		// progress.
		rt.publish(rt.subjects.Up(), []byte(rt.procID+" "+rt.hostLabel))
	}
	if rt.startedBy != "" {
		go w.beat()
	}
	return w, nil
}

// procTransit is a proc process's bus transit (bus.ConnOptions.Transit):
// what NATS's reader can hand over while the queue's pump waits for a
// CPU. A proc of a starved host takes in bursts of thousands of messages
// (a flood of frames, a whole mesh's answers) between two of its turns;
// 64 Ki pointers (512 KB) is cheap for a process of its own. Procs of an
// in-process cluster, thousands in one process, keep the bus's small
// default.
const procTransit = 1 << 16

// connect dials the proc's bus: the one its spawner dials, or, for a
// simulated host (env.HostBus), the host's own, a leaf of the job's hub
// that it starts here and its procs dial in turn.
func (w *worker) connect(env jobenv.Env, o options) (*bus.Conn, error) {
	opts := bus.ConnOptions{Name: "proc " + w.procID, Token: env.Bus.Token, TLS: hostagent.ClientTLS(env.Bus),
		HubServers: env.Bus.Hubs, MaxMessage: o.maxMessage, OnError: w.busFault, ReconnectFor: o.hostTimeout, OnLink: w.linkChanged,
		ConnectFor: busConnectFor}
	if o.starter == nil {
		opts.Transit = procTransit
	}
	if !env.HostBus {
		return bus.Connect(env.Bus.URL, opts)
	}
	hb, err := hostagent.StartHostBus(context.Background(), hostagent.HostBusConfig{Job: w.job, Bus: env.Bus, Log: w.log, Key: w.procID})
	if err != nil {
		return nil, err
	}
	conn, err := bus.ConnectInProcess(hb.Server(), opts)
	if err != nil {
		hb.Close()
		return nil, err
	}
	w.hostBus, w.bus = hb, hb.Procs()
	return conn, nil
}

// watchHostBus closes the link, which ends the proc, once its host's
// bus has been cut off from the hub for good.
func (w *worker) watchHostBus() {
	select {
	case err := <-w.hostBus.Lost():
		w.log.Error().Err(err).Msg("host bus cut off from the job")
		w.link.Close()
	case <-w.ctx.Done():
	}
}

// beat tells the agent that started this proc, every heartbeat interval,
// that it is alive; from a goroutine of its own, so that a busy
// dispatcher does not make it look dead (see hostagent.WatchLiveness).
func (w *worker) beat() {
	t := time.NewTicker(w.opts.heartbeat)
	defer t.Stop()
	for {
		w.sendControl(w.startedBy, wire.OpAlive, 0, nil)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			return
		}
	}
}

// A proc has no subjects of its own beyond every runtime's.
// take takes the client's notices (PreemptNotice): a proc subscribes to
// them, the client sends them.
func (w *worker) take(m bus.Message) bool {
	if m.Subject != w.subjects.Notice() {
		return false
	}
	w.noticed(m.Data)
	return true
}

// unhandled is the root's: in a proc, supervision sends what nobody here
// handles up to the client, so this is not called.
func (w *worker) unhandled(f *MeshFailure) {
	w.log.Error().Str("failure", f.Error()).Msg("an unhandled failure in a proc")
}

func (w *worker) procEnded(wire.GoneNotice) {}

func (w *worker) procsStarted(*ProcMesh) {}

func (w *worker) linesArrived() {}

func (w *worker) watchSubjects(agent string) []string {
	return []string{w.subjects.Deaths(agent)}
}

// ownSubjects: a proc hears the notices the client sends.
func (w *worker) ownSubjects() []string { return []string{w.subjects.Notice()} }

// root: a proc's unhandled failures go up to the client.
func (w *worker) root() bool { return false }

// registry: a proc asks the client, which keeps the job's names.
func (w *worker) registry() nameService { return procNames{w.core} }

// heardAgent: a proc keeps no view of the job.
func (w *worker) heardAgent(string) {}

// supervised: a proc keeps no view of the job.
func (w *worker) supervised(routerEvent, []routerEffect) {}

// meshName: prefixed with this proc's id, so that two spawners never make
// the same name.
func (w *worker) meshName(seq uint64) string {
	return w.procID + ".procs" + strconv.FormatUint(seq, 10)
}
