package hostagent

import (
	"fmt"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// bootstrap is how a proc was started: what RespawnProc needs to start
// another in its place. It is never changed once made; a proc and the
// procs that take its place share it.
type bootstrap struct {
	argv []string // wrapper, program and arguments (or command)
	// prog is the program's descriptor, which argv[progAt] names: what
	// runs (nil: argv runs as it is, a command or the self-exec).
	prog   *bincache.Program
	progAt int
	// base is the environment before the job's variables: this agent's
	// own (cleaned) and Config.Env, as they were at the spawn. The procs
	// of one SpawnProcs share it.
	base  []string
	extra []string // the proc's own variables (SpawnProcsReq.Env, its GPU mapped)
	cpus  []int    // its CPU binding (none: any)
	mesh  string   // its proc mesh's name
	rank  int      // its rank in the proc mesh
	// command: it runs SpawnProcsReq.Command, not an SDK proc.
	command bool
	// pool is its mesh's spares on this host (nil: none); a spare's own
	// bootstrap has no extra, cpus or rank.
	pool *sparePool
}

// respawnable is an ended proc's entry in Agent.respawnable: its
// bootstrap, until a proc is started in its place; then only that
// proc's id.
type respawnable struct {
	boot      *bootstrap
	successor string
}

// maxRespawnable bounds the ended procs whose bootstraps an agent keeps
// for RespawnProc: those of its last maxRespawnable ended procs. A proc
// that ended before them cannot be respawned (the request is refused,
// saying so). An entry whose proc was respawned keeps only the id of its
// successor, so what the agent keeps of ended procs is at most
// maxRespawnable bootstraps (a few kilobytes each: the argv and the
// proc's own variables; the agent's environment is shared by the procs
// of a spawn) and as many ids.
const maxRespawnable = 4096

// keepBootstrap keeps the bootstrap of p, which ended, for RespawnProc;
// the oldest kept goes past maxRespawnable. Called under a.mu, as p's
// end is recorded: whoever hears of the end can respawn it.
func (a *Agent) keepBootstrap(p *proc) {
	if p.boot == nil {
		return
	}
	a.respawnable[p.id] = &respawnable{boot: p.boot}
	if a.respawnOrder = append(a.respawnOrder, p.id); len(a.respawnOrder) > maxRespawnable {
		delete(a.respawnable, a.respawnOrder[0])
		a.respawnOrder = a.respawnOrder[1:]
	}
}

// RespawnProc starts proc req.New in the place of req.Old, a proc this
// agent started that has ended, as Old was started: the same program
// and arguments (or command), wrapper, CPU binding, environment, rank
// and proc mesh name. Only its id and where it reports ready differ: its
// ready report (ProcReady) goes to req.Proc#req.Port with rank 0, sent by
// the new proc itself for an SDK proc, by the agent once started for a
// command. The job's variables are made anew for New: the bus is the one
// the agent's procs dial now (SetBus), and MONARCH_PARENT, the proc its
// ready report goes to, is req.Proc (Parent is that and nothing more, so
// Old's would send New's report to a port nobody waits on).
//
// Old has at most one successor: when Old was respawned already, by
// whoever asked first, and its successor runs (and, for an SDK proc, has
// started its runtime: it beats), the answer is that proc's ready report
// (ProcReady with Proc set), and nothing is started: every mesh that had
// members on Old meets the same new proc. Its successor can be respawned
// in turn, once it ended.
//
// It is refused, with an error for rank 0 on the port naming the host
// and both procs, when Old is not a proc of this agent (or ended before
// the last maxRespawnable of its ends), Old still runs, Old's successor
// is still starting or ended too, New is a proc of this agent (running,
// being started, or one of its last ends), New is Old, or the agent is
// closing. A start that fails is an error there too (ErrProcFailed), and
// Old may then be respawned again.
//
// It does not wait for the new proc; call it on a goroutine of its own,
// as SpawnProcs.
func (a *Agent) RespawnProc(req wire.RespawnProcReq) {
	a.started.Store(true)
	if req.Adopt != nil {
		a.adopt(req)
		return
	}
	b, successor, spare, err := a.claim(req)
	if spare != nil {
		a.handSlot(spare, b)
		return
	}
	if err == nil && successor != "" {
		var p *proc
		if p, err = a.awaitUp(successor); err == nil {
			ready := wire.ProcReady{PID: p.process.Pid(), Host: a.cfg.Host, Proc: p.id}
			a.sendToPort(req.Proc, req.Port, 0, 0, func(e *msgpack.Encoder) error { return e.Encode(&ready) })
			return
		}
		err = fmt.Errorf("proc %s was respawned already, as %s, %w", req.Old, successor, err)
	}
	if err != nil {
		a.replyError(req.Proc, req.Port, 0, fmt.Errorf("respawn proc %s as %s on %s: %w", req.Old, req.New, a.cfg.Host, err))
		return
	}
	_, err = a.launch(req.New, b, &readyTo{req.Proc, req.Port, 0})
	a.mu.Lock()
	delete(a.respawning, req.New)
	if err != nil {
		// Old may be respawned again: it has no successor.
		if r := a.respawnable[req.Old]; r != nil && r.successor == req.New {
			r.boot, r.successor = b, ""
		}
	}
	a.mu.Unlock()
	if err != nil {
		a.replyError(req.Proc, req.Port, 0, fmt.Errorf("respawn proc %s as %s: %w", req.Old, req.New, err))
	}
}

// successorWait bounds how long a respawn of a proc replaced already
// waits for its successor, being started, to be up.
const successorWait = time.Minute

// awaitUp waits until proc id, a successor being started or running, is
// up: a command started, an SDK proc beating (its runtime started). It
// fails if the proc ends, the agent closes, or successorWait passes.
func (a *Agent) awaitUp(id string) (*proc, error) {
	deadline := time.Now().Add(successorWait)
	for {
		a.mu.Lock()
		p, starting := a.children[id], a.respawning[id]
		a.mu.Unlock()
		switch {
		case p != nil && (p.command || p.lastAlive.Load() != 0) && !a.handing(p):
			return p, nil
		case p == nil && !starting:
			return nil, fmt.Errorf("which ended")
		case a.closing.Load():
			return nil, fmt.Errorf("and the host agent is closing")
		case time.Now().After(deadline):
			return nil, fmt.Errorf("which did not start its runtime within %v", successorWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// claim checks that req.New may take req.Old's place and, if so, takes
// Old's bootstrap: Old's successor is New from now on, and New is being
// started; or, when Old's mesh has a spare up and idle here, that spare,
// which is Old's successor from now on and is handed Old's slot. When Old
// has a successor already, it returns its id instead.
func (a *Agent) claim(req wire.RespawnProcReq) (*bootstrap, string, *proc, error) {
	if req.New == req.Old {
		return nil, "", nil, fmt.Errorf("a proc cannot take its own place")
	}
	if a.closing.Load() {
		return nil, "", nil, fmt.Errorf("the host agent is closing")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, running := a.children[req.Old]; running {
		return nil, "", nil, fmt.Errorf("proc %s is still running", req.Old)
	}
	r := a.respawnable[req.Old]
	switch {
	case r == nil:
		if _, ended := a.ended[req.Old]; ended {
			return nil, "", nil, fmt.Errorf("proc %s ended before the last %d ends of this host's procs, whose starts are all the agent keeps", req.Old, maxRespawnable)
		}
		return nil, "", nil, fmt.Errorf("proc %s is not a proc this agent started", req.Old)
	case r.boot == nil:
		return nil, r.successor, nil, nil
	}
	_, running := a.children[req.New]
	_, ended := a.ended[req.New]
	_, kept := a.respawnable[req.New]
	if running || ended || kept || a.respawning[req.New] {
		return nil, "", nil, fmt.Errorf("proc %s is a proc of this agent already", req.New)
	}
	b := r.boot
	if sp := a.takeSpare(b, req); sp != nil {
		r.boot, r.successor = nil, sp.id
		return b, "", sp, nil
	}
	r.boot, r.successor = nil, req.New
	a.respawning[req.New] = true
	return b, "", nil, nil
}
