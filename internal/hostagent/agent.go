package hostagent

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"
)

// Link is what an agent needs of its process's connection to the job's
// bus.
type Link interface {
	Publish(subject string, data []byte) error
	// MaxMessage is the largest message the link sends.
	MaxMessage() int
}

// Config says what an agent is and what its procs run.
type Config struct {
	ID  string // the agent's proc id: its process's own, or jobenv.AgentID(i)
	Job string
	Bus jobenv.Bus // what its procs dial
	// Host is what its procs' lines call their host: the machine's name,
	// or a simulated host's (h0, h1, ...).
	Host string
	// Addr is where procs of other hosts reach this host's (FreePort's
	// answer); "" for 127.0.0.1, when every proc it serves is on this
	// machine.
	Addr string
	// Program, Args, Dir and Env: what each proc runs. An empty Program
	// runs this process's own program with its arguments (the SDK's
	// self-exec): os.Executable and os.Args[1:]. Any other is opened and
	// checked once, and run from that descriptor (see program.go).
	Program string
	Args    []string
	Dir     string
	Env     []string
	// ProgramSum is the sha256 (hex) Program must have; "" checks only
	// who owns it and its folders and who may write them.
	ProgramSum string
	// StopTimeout is how long a proc asked to stop has before it is
	// killed.
	StopTimeout time.Duration
	Log         zerolog.Logger
	// OnEnd, if set, hears of every proc of this agent that ends, once its
	// output has been sent; not once Close has begun.
	OnEnd func(wire.GoneNotice)
	// Heartbeat is how often the agent heartbeats (HeartbeatInterval
	// when zero).
	Heartbeat time.Duration
	// Knows, if set, reports whether its process knows proc id to be in
	// the job though this agent did not start it: Ended does not call
	// such an id unknown.
	Knows func(id string) bool
	// Starter, if set, starts the SDK procs instead of executing the
	// program (starter.go).
	Starter Starter
}

// OutputGrace bounds how long an ended proc's output pipes may stay open
// (held by a grandchild) before they are closed.
const OutputGrace = 2 * time.Second

// Agent starts, watches and stops the procs of one host. Its methods are
// safe for concurrent use.
type Agent struct {
	cfg      Config
	link     Link
	subjects jobenv.Subjects
	program  *program // cfg.Program's descriptor; nil for the self-exec

	mu       sync.Mutex
	children map[string]*proc
	ports    map[int]bool               // handed out by FreePort
	ended    map[string]wire.GoneNotice // procs that ended, for Ended (bounded: maxEnded)
	endOrder []string                   // ended's keys, oldest first
	// respawnable holds what RespawnProc needs of ended procs (bounded:
	// maxRespawnable), and respawning the ids being started in the place
	// of one (see respawn.go).
	respawnable  map[string]*respawnable
	respawnOrder []string // respawnable's keys, oldest first
	respawning   map[string]bool
	// execs are the commands of OpExec that run, by asker and id
	// (exec.go).
	execs map[string]*execRun
	// pools are the spares kept for each mesh, by its name (spares.go):
	// the newest SpawnProcs' of that name.
	pools map[string]*sparePool

	// keeper ends its children's process groups if it dies (keeper.go);
	// started at the first child.
	keeper keeperOnce

	started atomic.Bool // it has started a proc: it heartbeats from then on
	closing atomic.Bool // Close has begun: ends are expected, not told
}

// New makes an agent that sends through link. It starts nothing until
// asked.
func New(cfg Config, link Link) *Agent {
	a := &Agent{cfg: cfg, link: link, subjects: jobenv.SubjectsOf(cfg.Job), children: map[string]*proc{}, ports: map[int]bool{},
		ended: map[string]wire.GoneNotice{}, respawnable: map[string]*respawnable{}, respawning: map[string]bool{},
		execs: map[string]*execRun{}, pools: map[string]*sparePool{}}
	if cfg.Program != "" {
		a.program = &program{path: cfg.Program, sum: cfg.ProgramSum}
	}
	return a
}

// maxEnded bounds the ends an agent remembers for Ended: a process that
// learns of a proc after this many more of its host's procs have ended
// is not told by Ended (the proc is gone; calls to it fail at their
// deadline, or when per-proc liveness notices).
const maxEnded = 1 << 16

// Ended answers req on the reply port: which of its procs have ended,
// and which ids it does not know (Config.Knows).
func (a *Agent) Ended(req wire.EndedReq, replyProc string, replyPort uint64) {
	var out wire.EndedReply
	var unknown []string
	a.mu.Lock()
	for _, id := range req.IDs {
		if n, ok := a.ended[id]; ok {
			out.Gone = append(out.Gone, n)
		} else if a.children[id] == nil && !a.respawning[id] {
			unknown = append(unknown, id)
		}
	}
	a.mu.Unlock()
	for _, id := range unknown {
		if a.cfg.Knows == nil || !a.cfg.Knows(id) {
			out.Unknown = append(out.Unknown, id)
		}
	}
	a.sendToPort(replyProc, replyPort, 0, 0, func(e *msgpack.Encoder) error { return e.Encode(&out) })
}

// Runs reports whether proc id is one this agent started and that has
// not ended (or is being started).
func (a *Agent) Runs(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.children[id] != nil || a.respawning[id]
}

// SetBus changes what the procs this agent starts from now on dial.
func (a *Agent) SetBus(b jobenv.Bus) {
	a.mu.Lock()
	a.cfg.Bus = b
	a.mu.Unlock()
}

// Started reports whether the agent has been asked to start procs.
func (a *Agent) Started() bool { return a.started.Load() }

// SpawnProcs starts the procs req asks for. Each new SDK proc reports
// ready to req's port itself; a command proc (req.Command) is reported
// ready by the agent once started. A proc that cannot be started is
// reported there, as an error for its rank naming the host and the
// command. It does not wait for the procs.
func (a *Agent) SpawnProcs(req wire.SpawnProcsReq) {
	a.started.Store(true)
	exe, args := a.cfg.Program, a.cfg.Args
	command := req.Command != nil
	var prog *bincache.Program
	switch {
	case command:
		exe, args = req.Command[0], req.Command[1:]
	case a.program != nil:
		var err error
		if prog, err = a.program.get(); err != nil {
			for i, r := range req.Ranks {
				a.replyError(req.Proc, req.Port, r, fmt.Errorf("%w: proc %s on %s: %v", wire.ErrProcFailed, req.IDs[i], a.cfg.Host, refused(exe, err)))
			}
			return
		}
	case exe == "":
		var err error
		if exe, err = os.Executable(); err != nil {
			for _, r := range req.Ranks {
				a.replyError(req.Proc, req.Port, r, fmt.Errorf("SpawnProcs: find this program: %w", err))
			}
			return
		}
		args = os.Args[1:]
	}
	base := append(jobenv.Clean(os.Environ()), a.cfg.Env...)
	pool := a.newPool(req, exe, args, prog, base)
	for i, id := range req.IDs {
		rank := req.Ranks[i]
		argv := append([]string{exe}, args...)
		at := 0
		if req.Wrap != nil {
			argv = append(append([]string(nil), req.Wrap[i]...), argv...)
			at = len(req.Wrap[i])
		}
		var cpus []int
		if req.CPUs != nil {
			cpus = req.CPUs[i]
		}
		procEnv, err := a.gpus(req.Env[i])
		if err != nil {
			a.replyError(req.Proc, req.Port, rank, fmt.Errorf("%w: proc %s on %s: %v", wire.ErrProcFailed, id, a.cfg.Host, err))
			continue
		}
		b := &bootstrap{argv: argv, prog: prog, progAt: at, base: base, extra: procEnv, cpus: cpus, mesh: req.Mesh, rank: rank, command: command, pool: pool}
		if _, err := a.launch(id, b, &readyTo{req.Proc, req.Port, rank}); err != nil {
			a.replyError(req.Proc, req.Port, rank, err)
		}
	}
	if pool != nil {
		a.fill(pool)
	}
}

// readyTo is where a new proc's ready report goes: rank of proc's port.
type readyTo struct {
	proc string
	port uint64
	rank int
}

// launch starts proc id as b says, its ready report for to: an SDK proc
// sends it itself, once it serves; a command proc's is sent here, once
// started. With no to, it starts a spare of b.pool: idle, no rank, nobody
// to report to. A proc that cannot start is an error naming the host and
// the program.
func (a *Agent) launch(id string, b *bootstrap, to *readyTo) (*proc, error) {
	if a.cfg.Starter != nil && !b.command {
		return a.launchWith(id, b, to)
	}
	cmd := exec.Command(b.argv[0], b.argv[1:]...)
	if b.prog != nil {
		fromProgram(cmd, b.prog, b.progAt)
	}
	cmd.Dir = a.cfg.Dir
	env := append([]string(nil), b.base...)
	if !b.command {
		// An SDK proc dials the job's bus; a command is given no
		// secret.
		env = append(env, a.procEnv(id, to)...)
	}
	cmd.Env = append(env, b.extra...)
	// Its own process group: a terminal's Ctrl-C reaches the client
	// only, which then stops the procs in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := a.start(id, labelOf(b, to), cmd, b.cpus)
	if err != nil {
		return nil, fmt.Errorf("%w: start proc %s (%s) on %s: %v", wire.ErrProcFailed, id, b.argv[0], a.cfg.Host, err)
	}
	p.command, p.boot, p.spare = b.command, b, to == nil
	a.watchChild(p)
	if b.command {
		// Up, as an SDK proc says itself: the job's counts and the
		// launcher's progress include it.
		a.link.Publish(a.subjects.Up(), []byte(id+" "+a.cfg.Host))
		ready := wire.ProcReady{PID: p.process.Pid(), Host: a.cfg.Host}
		a.sendToPort(to.proc, to.port, to.rank, 0, func(e *msgpack.Encoder) error { return e.Encode(&ready) })
	}
	return p, nil
}

// launchWith starts proc id as b says through the Starter: what an
// executed SDK proc reads in its environment, it is given as a list.
func (a *Agent) launchWith(id string, b *bootstrap, to *readyTo) (*proc, error) {
	process, err := a.cfg.Starter.Start(append(a.procEnv(id, to), b.extra...))
	if err != nil {
		return nil, fmt.Errorf("%w: start proc %s on %s: %v", wire.ErrProcFailed, id, a.cfg.Host, err)
	}
	p := &proc{id: id, boot: b, process: process, ended: make(chan struct{}), up: make(chan struct{})}
	p.label.Store(ptr(labelOf(b, to)))
	a.watchChild(p)
	return p, nil
}

// procEnv is the job's contract for SDK proc id: the bus its agent's
// procs dial now, and where it reports ready (none: a spare).
func (a *Agent) procEnv(id string, to *readyTo) []string {
	a.mu.Lock()
	dial := a.cfg.Bus
	a.mu.Unlock()
	p := &jobenv.Proc{ID: id, Agent: a.cfg.ID, Spare: to == nil}
	if to != nil {
		p.Parent, p.ReadyPort, p.ReadyRank = to.proc, to.port, to.rank
	}
	return jobenv.Env{Job: a.cfg.Job, Bus: dial, HostAddr: a.cfg.Addr, Proc: p}.Environ()
}

// watchChild makes p a child of the agent (an idle one of its pool, for
// a spare) and watches it.
func (a *Agent) watchChild(p *proc) {
	a.mu.Lock()
	a.children[p.id] = p
	if p.spare {
		p.boot.pool.idle[p.id] = p
	}
	a.mu.Unlock()
	go a.watch(p)
}

// gpus maps a proc's CUDA_VISIBLE_DEVICES, its index in the mesh's GPU
// dimension, onto the GPUs the scheduler gave this host: the index-th of
// this agent's own CUDA_VISIBLE_DEVICES when that lists them, and an
// index past them, or past SLURM_GPUS_ON_NODE, is an error.
func (a *Agent) gpus(env []string) ([]string, error) {
	const name = "CUDA_VISIBLE_DEVICES="
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, name)
		if !ok {
			continue
		}
		idx, err := strconv.Atoi(v)
		if err != nil {
			return env, nil // not an index: the caller's own value
		}
		if own := os.Getenv("CUDA_VISIBLE_DEVICES"); own != "" {
			list := strings.Split(own, ",")
			if idx >= len(list) {
				return nil, fmt.Errorf("GPU index %d, but the host has %d GPUs (CUDA_VISIBLE_DEVICES=%s)", idx, len(list), own)
			}
			out := slices.Clone(env)
			out[i] = name + list[idx]
			return out, nil
		}
		if n, err := strconv.Atoi(os.Getenv("SLURM_GPUS_ON_NODE")); err == nil && idx >= n {
			return nil, fmt.Errorf("GPU index %d, but Slurm gave the host %d GPUs (SLURM_GPUS_ON_NODE)", idx, n)
		}
	}
	return env, nil
}

// FreePort answers on the reply port with a TCP port free on this host,
// never handed out before by this agent, and the address this host is
// reached at (Config.Addr).
func (a *Agent) FreePort(replyProc string, replyPort uint64) {
	port, err := a.freePort()
	if err != nil {
		a.replyError(replyProc, replyPort, 0, fmt.Errorf("free port on %s: %w", a.cfg.Host, err))
		return
	}
	fp := wire.FreePort{Addr: a.cfg.Addr, Port: port}
	if fp.Addr == "" {
		fp.Addr = "127.0.0.1"
	}
	a.sendToPort(replyProc, replyPort, 0, 0, func(e *msgpack.Encoder) error { return e.Encode(&fp) })
}

// freePort asks the kernel for a free port (bind to port 0 on every
// address, then let it go), skipping ports this agent handed out before:
// two meshes of one job get two ports. Between the answer and the proc's
// own bind another process may take it; the proc then fails to bind and
// says so, as under torchrun.
func (a *Agent) freePort() (int, error) {
	for range 16 {
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		a.mu.Lock()
		taken := a.ports[port]
		a.ports[port] = true
		a.mu.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port this agent has not handed out already")
}

// StopProcs stops the given procs of this host (SIGTERM; SIGKILL after
// the request's grace, or the stop timeout) and then answers on the reply port. Procs it does not
// have (ended already) are not an error.
func (a *Agent) StopProcs(req wire.StopProcsReq, replyProc string, replyPort uint64) {
	grace := a.cfg.StopTimeout
	if req.GraceMS > 0 {
		grace = time.Duration(req.GraceMS) * time.Millisecond
	}
	go func() {
		ps := a.take(req.IDs, true)
		a.stop(ps, grace)
		a.stopSpares(ps, grace)
		a.reply(replyProc, replyPort, req.Rank)
	}()
}

// SyncLogs answers on the reply port once every line the given procs
// wrote so far has been sent to the job's log (bounded: 5s a proc).
func (a *Agent) SyncLogs(req wire.StopProcsReq, replyProc string, replyPort uint64) {
	go func() {
		for _, p := range a.take(req.IDs, false) {
			p.syncOutput(5 * time.Second)
		}
		a.reply(replyProc, replyPort, req.Rank)
	}()
}

// SignalProcs sends the request's signal to those of the given procs
// that catch it (see catches): a notice that the job is ending, which a
// proc that does not expect it would die of. It answers on the reply port
// with how many it sent it to.
func (a *Agent) SignalProcs(req wire.StopProcsReq, replyProc string, replyPort uint64) {
	sig := syscall.Signal(req.Signal)
	sent := 0
	for _, p := range a.take(req.IDs, false) {
		if pid := p.process.Pid(); pid > 0 && !p.process.Exited() && catches(pid, sig) {
			p.process.Signal(sig)
			sent++
		}
	}
	a.sendToPort(replyProc, replyPort, req.Rank, 0, func(e *msgpack.Encoder) error { return e.EncodeInt(int64(sent)) })
}

// take finds the children with the given ids; stopping marks those still
// running, so that their ends are told as stops, not failures. A child
// that ended before (reaped, its output still draining) is not marked:
// it ended on its own, and its end is told as it was.
func (a *Agent) take(ids []string, stopping bool) []*proc {
	var ps []*proc
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		// A proc that ended stands for the proc started in its place
		// (RespawnProc), and so on down the chain: whoever holds the
		// proc mesh it was spawned in stops and signals that one.
		for range maxRespawnable {
			if p := a.children[id]; p != nil {
				if stopping && !p.process.Exited() {
					p.stopping = true
				}
				ps = append(ps, p)
				break
			}
			r := a.respawnable[id]
			if r == nil || r.successor == "" {
				break
			}
			id = r.successor
		}
	}
	return ps
}

// Close stops every proc and command (Exec) of this agent and returns
// once they are gone
// (or the stop timeout and child.KillWait have passed). Their ends are not
// told: the whole process is going. Idempotent.
func (a *Agent) Close() {
	a.closing.Store(true)
	a.stopExecs()
	a.mu.Lock()
	ps := make([]*proc, 0, len(a.children))
	for _, p := range a.children {
		p.stopping = true
		ps = append(ps, p)
	}
	a.mu.Unlock()
	a.stop(ps, a.cfg.StopTimeout)
	// What ended procs left in their groups goes too: nothing of the
	// agent's outlives it.
	a.keeper.close()
	if a.program != nil {
		a.program.close()
	}
}

// stop ends procs together (see child.StopAll) and waits until their
// output is sent.
func (a *Agent) stop(ps []*proc, grace time.Duration) {
	procs := make([]Process, len(ps))
	for i, p := range ps {
		procs[i] = p.process
	}
	stopAll(procs, grace)
	deadline := time.NewTimer(OutputGrace + time.Second)
	defer deadline.Stop()
	for _, p := range ps {
		select {
		case <-p.ended:
		case <-deadline.C:
			return
		}
	}
}

// watch waits for a proc to end, sends its last lines, and tells the job.
func (a *Agent) watch(p *proc) {
	<-p.process.Done()
	// When it ended, before its output is drained: the drain may hold
	// the notice for up to OutputGrace, and one proc's end may be heard
	// after another's that happened later (spmd orders them by this).
	at := time.Now()
	p.drainOutput(OutputGrace)
	if ep, ok := p.process.(execProcess); ok {
		a.forgetIfEmpty(ep.Pid())
	}
	// Its last stderr line, read at most at its end: a line read while
	// draining was written before the end (or by a grandchild after it),
	// and is placed at the end, the latest it can have been written.
	errAt := min(p.lastErr.Load(), at.UnixNano())
	reason, status := p.process.End()
	if p.unresponsive.Load() {
		reason = "unresponsive (no sign of life: stopped, or its runtime wedged): " + reason
	}
	a.mu.Lock()
	delete(a.children, p.id)
	idle, hand := p.spare, p.hand
	n := wire.GoneNotice{Proc: p.id, Reason: reason + " (host " + a.cfg.Host + ")", Stopped: p.stopping,
		Status: status, At: at.UnixNano(), ErrAt: errAt}
	a.ended[p.id] = n
	if a.endOrder = append(a.endOrder, p.id); len(a.endOrder) > maxEnded {
		delete(a.ended, a.endOrder[0])
		a.endOrder = a.endOrder[1:]
	}
	switch {
	case idle:
		a.spareEnded(p)
	case hand != nil:
		a.unhand(p, hand) // its slot goes back to the proc it was to replace; the asker is told below
	default:
		a.keepBootstrap(p) // before anyone hears of the end: a respawn may follow at once
	}
	a.mu.Unlock()
	close(p.ended)
	if a.closing.Load() {
		return // the whole process is going: nobody to tell
	}
	if idle {
		a.cfg.Log.Info().Str("spare", p.id).Str("reason", reason).Msg("spare ended")
		a.fill(p.boot.pool)
		return // nobody knows of it
	}
	if hand != nil {
		a.replyError(hand.to.proc, hand.to.port, hand.to.rank, fmt.Errorf("%w: respawn proc %s on %s: spare %s took its slot and ended before it was ready: %s",
			wire.ErrProcFailed, hand.old, a.cfg.Host, p.id, reason))
	}
	switch {
	case p.command:
		// A command's end is its client's to tell.
		a.cfg.Log.Info().Str("proc", p.id).Str("reason", reason).Msg("command ended")
	case !n.Stopped:
		a.cfg.Log.Warn().Str("proc", p.id).Str("reason", reason).Msg("proc ended")
	}
	if a.cfg.OnEnd != nil {
		a.cfg.OnEnd(n)
	}
}

// reply answers a request on its port with nil.
func (a *Agent) reply(proc string, port uint64, rank int) {
	a.sendToPort(proc, port, rank, 0, func(e *msgpack.Encoder) error { return e.EncodeNil() })
}

// replyError answers a request on its port with err.
func (a *Agent) replyError(proc string, port uint64, rank int, err error) {
	r := wire.NewErrorReply(err)
	a.sendToPort(proc, port, rank, wire.FlagError, func(e *msgpack.Encoder) error { return e.Encode(&r) })
}

func (a *Agent) sendToPort(proc string, port uint64, rank int, flags uint8, body func(*msgpack.Encoder) error) {
	h := wire.Header{Kind: wire.KindPort, Port: port, Rank: rank, Flags: flags, ReplyTo: a.cfg.ID}
	if err := a.publishFrame(a.subjects.Proc(proc), &h, body); err != nil {
		a.cfg.Log.Warn().Err(err).Str("to", proc).Msg("cannot answer a request")
	}
}

// publishFrame sends one frame with header h and the payload body writes.
func (a *Agent) publishFrame(subject string, h *wire.Header, body func(*msgpack.Encoder) error) error {
	w, err := wire.NewFrame(h, a.link.MaxMessage())
	if err != nil {
		return err
	}
	defer w.Free()
	if err := body(w.Enc); err != nil {
		return err
	}
	return a.link.Publish(subject, w.Bytes())
}
