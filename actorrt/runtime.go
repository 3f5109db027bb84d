package actorrt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/actorrt/internal/liveness"
	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/delivery"
	"github.com/monarch-go/monarch/internal/hostagent"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
	"github.com/vmihailenco/msgpack/v5"
)

// core is what every runtime of a process of a job that hosts actors has,
// the client's and a proc's alike: their node on the bus, the actors they
// host, the host agent that serves ThisHost(ctx), supervision of the meshes
// they spawn, and what they know of the job's health. What only one of
// them does is its role (client, worker).
type core struct {
	*node
	role role
	opts options

	hostname string // this machine's name (what procs dial, MASTER_ADDR)
	// hostLabel is what lines and messages call this host: hostname, or a
	// simulated host's name (h0, h1, ...).
	hostLabel string
	bus       jobenv.Bus // what procs started from here dial
	startedBy string     // the host agent that started this process ("" for the client)
	// spare: this proc was started idle, a spare of its mesh, and waits
	// for a slot from its agent (inbound.go, takeSlot).
	spare   atomic.Bool
	logFile io.Closer

	actors  *localActors
	agent   *hostagent.Agent
	sup     *supervision
	members *members // who is in the job, for the delivery layer

	ctx         context.Context // ends when the runtime shuts down
	cancel      context.CancelFunc
	dispatchEnd chan struct{} // closed when the dispatcher returns
	closing     atomic.Bool   // shutdown has begun: procs ending now is expected
	meshSeq     atomic.Uint64
	procMeshSeq atomic.Uint64 // proc meshes spawned here without a name
	procs       spawner       // the procs started from here, by their agents
	ending      notices       // the job is ending: what this process heard
	// profiling: a CPU profile of `monarch profile` runs in this process,
	// and actor calls carry pprof labels (profile.go).
	profiling atomic.Bool
	// sent counts the calls sent from here to each actor mesh (feed.go).
	sent sentTable
	// agents are the host agents whose heartbeats and links this runtime
	// watches (agentwatch.go).
	agents agentWatch
}

// role is what the client and a proc do differently.
type role interface {
	// take handles a message on a subject only this role subscribes to;
	// it reports whether it did.
	take(m bus.Message) bool
	// unhandled takes a failure nobody below the root handled.
	unhandled(f *MeshFailure)
	// procEnded hears of every proc of the job that ends.
	procEnded(n wire.GoneNotice)
	// procsStarted hears of every proc mesh spawned from this process.
	procsStarted(pm *ProcMesh)
	// linesArrived is called once the procs' lines up to now have
	// reached this process (a flush barrier), to print them.
	linesArrived()
	// watchSubjects are the subjects to subscribe to, on the ordered
	// path, to watch a host agent (the ends of its procs); its heartbeats
	// every process watches on arrival (see watchAgent).
	watchSubjects(agent string) []string
	// ownSubjects are the subjects besides its inbox that the runtime
	// subscribes to at start (a proc hears the client's notices).
	ownSubjects() []string
	// root reports whether failures nobody handled end here (the client,
	// the root of the supervision tree) or go up (a proc).
	root() bool
	// registry is the job's names as this process reaches them.
	registry() nameService
	// meshName names a proc mesh spawned here without WithName.
	meshName(seq uint64) string
	// heardAgent and supervised tell this process's view of the job (the
	// client's; a proc keeps none) of a heartbeat of agent, and of a step
	// of supervision: the event and the effects the router asked for.
	heardAgent(agent string)
	supervised(ev routerEvent, effects []routerEffect)
}

// runtimeKey is the context key of the runtime a context belongs to:
// Main's function's ctx and every actor's carry theirs (start puts it in
// rt.ctx, from which both derive).
type runtimeKey struct{}

// runtimeOf is the runtime ctx belongs to: the one whose Main gave it
// (or a context derived from it), or whose actor's endpoint it is.
func runtimeOf(ctx context.Context) (*core, error) {
	if ctx != nil {
		if rt, ok := ctx.Value(runtimeKey{}).(*core); ok {
			return rt, nil
		}
	}
	return nil, ErrNotStarted
}

// decodingRuntime is the runtime that decodes with d (decodeIn): a
// reference decoded from the wire binds to it.
func decodingRuntime(d *msgpack.Decoder) (*core, error) {
	if rt, ok := wire.Owner(d).(*core); ok && rt != nil {
		return rt, nil
	}
	return nil, fmt.Errorf("%w: a mesh or port reference decoded outside a runtime", ErrNotStarted)
}

// decodeIn decodes payload p (of types) with fn, the references in it
// bound to rt.
func decodeIn(rt *core, p []byte, types []reflect.Type, fn func(*msgpack.Decoder) error) error {
	return wire.DecodePayloadFor(rt, p, types, fn)
}

// newRuntime makes the core of the runtime of proc procID of job, before
// it connects: its system log is open (logRole names the file).
func newRuntime(job, procID string, env jobenv.Env, o options, logRole string) (*core, error) {
	hostname, _ := os.Hostname()
	rt := &core{
		node:     &node{job: job, procID: procID, subjects: jobenv.SubjectsOf(job)},
		opts:     o,
		hostname: hostname, hostLabel: hostname,
		bus: env.Bus,
	}
	rt.procs.rt = rt
	if env.HostName != "" {
		rt.hostLabel = env.HostName
	}
	if env.Proc != nil {
		rt.startedBy = env.Proc.Agent
	}
	l, closer, err := logagg.SystemLogger(job, logRole)
	if err != nil {
		return nil, fmt.Errorf("actorrt: %w", err)
	}
	rt.log, rt.logFile = l, closer
	rt.health = newHealth(procID, o.hostTimeout, o.lostAfter, func(e []liveness.Effect) { applyHealth(rt, e) })
	return rt, nil
}

// start runs the runtime on its link for role: the proc's inbox, the
// deaths subject, the system actor, the dispatcher, heartbeats and the
// watch on other hosts.
func (rt *core) start(l link, r role) error {
	rt.link, rt.role = l, r
	rt.ctx, rt.cancel = context.WithCancel(context.WithValue(context.Background(), runtimeKey{}, rt))
	rt.sup = newSupervision(rt, r.root())
	rt.actors = newLocalActors(rt)
	in := inbound{rt}
	// What was sent is kept as long as a receiver may be late without
	// being lost: a suspected host is lost after lostAfter at most.
	rt.members = newMembers(rt, rt.opts.hostTimeout)
	rt.delivery = delivery.New(delivery.Config{Self: rt.procID, Subjects: rt.subjects, Retain: rt.opts.lostAfter + rt.opts.hostTimeout,
		Route: in.route, Flush: rt.actors.flush, Lost: in.lost, Drop: rt.drop, Failed: in.failed, MaxPayload: l.MaxMessage(),
		Standing: rt.members.standing, Ask: rt.members.ask}, l)
	if err := rt.actors.startSystemActor(); err != nil {
		return err
	}
	if err := rt.actors.startInspector(); err != nil {
		return err
	}
	rt.agent = hostagent.New(hostagent.Config{
		ID: rt.procID, Job: rt.job, Bus: rt.bus, Host: rt.hostLabel,
		StopTimeout: rt.opts.stopTimeout, Log: rt.log, OnEnd: rt.childEnded, Heartbeat: rt.opts.heartbeat, Knows: rt.members.knows,
		Starter: rt.opts.starter,
	}, l)
	// On a host whose bus delivers its procs' subjects (jobenv.Bus.Local),
	// this proc's arrives under the host's local prefix: dispatch maps it
	// back.
	subjects := append([]string{rt.subjects.Inbox(rt.procID, rt.bus.Local)}, r.ownSubjects()...)
	for _, s := range subjects {
		if _, err := l.Subscribe(s); err != nil {
			return fmt.Errorf("actorrt: proc %s: %w", rt.procID, err)
		}
	}
	rt.dispatchEnd = make(chan struct{})
	go rt.dispatchLoop()
	go rt.agent.Heartbeats(rt.ctx, false)
	go rt.agent.WatchLiveness(rt.ctx, rt.opts.hostTimeout)
	go rt.watchHosts()
	go rt.delivery.Run(rt.ctx)
	rt.started.Store(true)
	return nil
}

func (rt *core) dispatchLoop() {
	defer close(rt.dispatchEnd)
	err := rt.link.Run(rt.ctx, rt.dispatch)
	if errors.Is(err, bus.ErrClosed) {
		lost := fmt.Errorf("%w: proc %s lost its bus connection", ErrBus, rt.procID)
		rt.ports.failAll(lost)
		rt.actors.stopAll(lost)
		rt.cancel()
	}
}

// busFault is called by the bus for dropped messages and a lost link.
// A message lost to a full queue, or a lost link, breaks the delivery
// promise, so this proc stops trusting the bus: every waiting call fails
// now, and the dispatcher ends. A malformed message the bus dropped is no
// fault of the link: the bus reports the first of each kind, and it is
// logged like the dispatcher's own drops.
func (rt *core) busFault(err error) {
	var de *bus.DropError
	if errors.As(err, &de) {
		rt.log.Warn().Err(err).Str("drop", "bus-"+de.Kind.String()).Str("subject", de.Subject).
			Msg("dropped a malformed message; later ones of this kind are counted, not logged")
		return
	}
	rt.log.Error().Err(err).Str("proc", rt.procID).Msg("bus fault")
	rt.ports.failAll(fmt.Errorf("%w: proc %s: %v", ErrBus, rt.procID, err))
	if errors.Is(err, bus.ErrSlowConsumer) {
		go rt.link.Close()
	}
}

func (rt *core) newMeshID() string {
	return rt.procID + ".m" + strconv.FormatUint(rt.meshSeq.Add(1), 10)
}

// newMeshName names a proc mesh spawned here without WithName: procs1,
// procs2, ... in the client; prefixed with this proc's id in a proc, so
// that two spawners never make the same name.
func (rt *core) newMeshName() string { return rt.role.meshName(rt.procMeshSeq.Add(1)) }

// dispatch routes one message, on the dispatcher goroutine, in wire order.
func (rt *core) dispatch(m bus.Message) {
	m.Subject = rt.subjects.Public(m.Subject)
	if rt.role.take(m) {
		return
	}
	rt.delivery.Receive(m)
}

// childEnded hears from this process's host agent that a proc it started
// ended: this process tells the job.
func (rt *core) childEnded(n wire.GoneNotice) {
	if rt.closing.Load() {
		return // the whole runtime is going: nobody to tell
	}
	rt.health.gone(n, true)
}

// healthEffects carries out the effects of one step of rt's health table
// (liveness.Applier); said then logs, in one line each, the agents found
// late and those heard again: at spawn many agents may be late at once.
type healthEffects struct {
	rt         *core
	late, back []string
	silent     time.Duration // the least silence of the late
}

// applyHealth carries out what rt's health table asks for.
func applyHealth(rt *core, effects []liveness.Effect) {
	a := healthEffects{rt: rt}
	for _, e := range effects {
		e.ApplyTo(&a)
	}
	a.said()
}

func (a *healthEffects) Gone(e liveness.Gone) {
	rt := a.rt
	rt.role.procEnded(e.Notice)
	rt.procs.endOf(e.Notice)
	rt.delivery.ProcGone(e.Notice.Proc)
	rt.ports.failWaiting(e.Notice.Proc, goneError(e.Notice))
	rt.sup.procEnded(e.Notice)
	if !e.Announce {
		return
	}
	rt.announceAgain(func() { rt.announceGone(e.Notice, e.Agent) })
}

// announceAgain runs send now and again after a while, until the runtime
// closes: a notice lost to a link that was down is not otherwise sent
// again (receivers drop repeats).
func (rt *core) announceAgain(send func()) {
	send()
	for _, d := range hostagent.AnnounceAgain {
		time.AfterFunc(d, func() {
			if !rt.closing.Load() && rt.ctx.Err() == nil {
				send()
			}
		})
	}
}

func (a *healthEffects) Watch(e liveness.Watch) { a.rt.watchAgent(e.Agent) }
func (a *healthEffects) Ask(e liveness.Ask)     { a.rt.askEnded(e.Agent, e.Procs) }

func (a *healthEffects) Suspect(e liveness.Suspect) {
	if len(a.late) == 0 || e.Silent < a.silent {
		a.silent = e.Silent
	}
	a.late = append(a.late, e.Who)
}

func (a *healthEffects) Cleared(e liveness.Cleared) { a.back = append(a.back, e.Who) }

func (a *healthEffects) said() {
	if len(a.late) > 0 {
		a.rt.log.Warn().Msgf("%s late: silent for %v or more, link up: suspected, lost if silent for %v",
			someOf(a.late), a.silent.Round(100*time.Millisecond), a.rt.opts.lostAfter)
	}
	if len(a.back) > 0 {
		a.rt.log.Info().Msgf("%s heard again: no longer suspected", someOf(a.back))
	}
}

// someOf names the first few of many, and how many more.
func someOf(names []string) string {
	const most = 6
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// watchAgent subscribes to what tells that agent and its procs live and
// end: its heartbeats and its link (agentWatch), and what the role
// watches on the ordered path.
func (rt *core) watchAgent(agent string) {
	rt.agents.watch(rt, agent)
	for _, subj := range rt.role.watchSubjects(agent) {
		if _, err := rt.link.Subscribe(subj); err != nil {
			rt.log.Warn().Err(err).Str("agent", agent).Msg("cannot watch a host agent")
		}
	}
}

// announceGone tells the procs that care that a proc ended: the holders
// of procs of agent (the one that started it, whose deaths subject they
// watch) and, if the gone proc started procs itself, their holders.
func (rt *core) announceGone(n wire.GoneNotice, agent string) {
	for _, a := range []string{agent, n.Proc} {
		rt.announce(a, wire.OpGone, &n, n.Proc, "cannot announce a proc's end")
		if a == n.Proc {
			break
		}
	}
}

// announce sends a notice (op, body) about proc on agent's deaths
// subject, which every holder of that agent's procs watches; what says
// in the log what could not be sent, unless the runtime is shutting down
// (its link closing under the send is no news, as announceAgain's later
// sends hold).
func (rt *core) announce(agent, op string, body any, proc, what string) {
	if err := rt.sendControlOn(rt.subjects.Deaths(agent), op, 0, body); err != nil && !errors.Is(err, ErrStopped) && !rt.closing.Load() {
		rt.log.Warn().Err(err).Str("proc", proc).Msg(what)
	}
}

// askEnded asks agent which of procs have ended; the answer comes to a
// port of this process and is taken like any notice.
func (rt *core) askEnded(agent string, procs []string) {
	id, err := rt.ports.open(&endedPort{h: rt.health}, []string{agent})
	if err != nil {
		return // shutting down
	}
	if err := rt.sendControl(agent, wire.OpEnded, id, &wire.EndedReq{IDs: procs}); err != nil {
		rt.ports.close(id)
		rt.log.Warn().Err(err).Str("agent", agent).Msg("cannot ask a host agent which procs ended")
	}
}

// endedPort takes an agent's EndedReply.
type endedPort struct{ h *health }

func (p *endedPort) deliver(rt *core, f *wire.Frame) bool {
	var r wire.EndedReply
	if f.Flags&wire.FlagError == 0 && decodeBody(f, &r) == nil {
		for _, n := range r.Gone {
			if wire.ValidID(n.Proc) {
				p.h.gone(n, false)
			}
		}
	}
	return false
}

func (p *endedPort) fail(error) {}

// watchHosts ticks the health table, which declares silent host agents
// gone, until the runtime ends. A tick that comes late means this process
// was starved of CPU: the agents' silence may be its own, so they get a
// fresh start rather than a verdict.
func (rt *core) watchHosts() {
	interval := rt.opts.heartbeat / 4
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-t.C:
			now := time.Now()
			rt.health.tick(now, now.Sub(last) > 4*interval)
			last = now
		case <-rt.ctx.Done():
			return
		}
	}
}

// failOwed answers every port actor a still owes with err.
func (rt *core) failOwed(a *actor, err error) {
	for _, ref := range rt.health.takeOwed(a) {
		rt.sendErrorToPort(ref, err)
	}
}

// stop ends what every runtime has, after the role has done its part:
// the actors, the host agent's procs, the link. Idempotent.
func (rt *core) stop() {
	rt.closing.Store(true)
	rt.actors.stopAll(rt.endCause("is shutting down"))
	rt.agent.Close()
	rt.delivery.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	rt.link.Flush(ctx)
	cancel()
	rt.ports.failAll(fmt.Errorf("%w: runtime shut down", ErrStopped))
	rt.link.Close()
	rt.cancel()
	<-rt.dispatchEnd
}

func decodeBody(f *wire.Frame, v any) error {
	return wire.DecodePayload(f.Payload, []reflect.Type{reflect.TypeOf(v)}, func(d *msgpack.Decoder) error { return d.Decode(v) })
}
