package actorrt

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
)

// ProcOption says how SpawnProcs starts each proc: its environment, a
// command it runs under, the CPUs it may use, or a command it runs instead
// of this program.
type ProcOption func(*procOptions) error

type procOptions struct {
	env     func(Point) []string
	wrap    func(Point) []string
	cpus    func(Point) []int
	command []string
	gpusDim string
	name    string
	// hosts: the procs are simulated hosts (their agents), not a
	// ProcMesh of the user's: their loss is told by their procs' ends.
	hosts   bool
	restart *RestartPolicy
	spares  int // WithSpares
	// sparesAnyHost: WithSparesAnyHost.
	sparesAnyHost bool
}

// WithProcRestart replaces a proc of the mesh that ends, not on request
// (it crashed, was killed), by one its host agent starts in its place:
// the same program, environment, rank variables, wrapper and CPU binding,
// a new pid: the slot's next incarnation, which the ProcMesh reaches from
// then on. At most p.MaxRestarts replacements in p.Window, after p's
// backoff; past that, or when the host itself is gone, the loss goes to
// the mesh's owner (a MeshFailure with ProcLost). Actors on the lost proc
// are not restarted by it: those of a mesh with a RestartPolicy restart
// on the new proc, the others fail to their owner. p.Scope must be
// RestartMember (one proc's end leaves the others running); not with
// WithCommand, whose ends are Ends' alone.
func WithProcRestart(p RestartPolicy) ProcOption {
	return func(o *procOptions) error {
		if p.Scope.whole || len(p.Scope.dims) > 0 {
			return fmt.Errorf("WithProcRestart: scope %v: a proc mesh replaces the proc that ended alone (RestartMember)", p.Scope)
		}
		o.restart = &p
		return nil
	}
}

// WithSpares keeps n idle procs of the mesh on each of its hosts (at
// most 64): this program, started by the host's agent as the mesh's
// procs are, its runtime up and dialled in to the job's bus, with no
// rank. When a proc of the mesh ends and is replaced (WithProcRestart,
// or a mesh with a RestartPolicy that had members there), its host's
// agent hands its slot to a spare instead of starting a process: the
// spare sets the slot's variables (RANK, LOCAL_RANK, MONARCH_RANK_*,
// MASTER_*, CUDA_VISIBLE_DEVICES, WithProcEnv's) with os.Setenv before
// any actor of the slot runs on it, is bound to the slot's CPUs
// (WithProcBind) by the agent, and is the slot's proc from then on: every
// mesh and ProcMesh follows it as they follow a proc started in the
// place of one. The agent then starts another spare in the background.
// With no spare up (all taken, or still starting), a proc is started as
// without spares.
//
// Spares are procs of the job: they stop with their mesh (once no proc
// of it is left on the host) and with the job, a spare that dies is
// replaced in the pool (after 3 in a row that die before they are up, no
// more are started), and their lines carry the mesh's name marked
// "spare". They are not ranks: the job's counts leave them out until one
// takes a slot. Code a spare runs before it takes a slot (package
// initialisation, main up to Main) sees no rank variables. Not with
// WithCommand or WithWrapper (a command or a wrapper cannot take its
// rank late); an in-process cluster (actortest) keeps none.
func WithSpares(n int) ProcOption {
	return func(o *procOptions) error {
		if n < 0 || n > wire.MaxSpares {
			return fmt.Errorf("WithSpares(%d): want 0 to %d", n, wire.MaxSpares)
		}
		o.spares = n
		return nil
	}
}

// WithSparesAnyHost lets the slots of a host that is lost be taken by
// the spares (WithSpares) of the mesh's other hosts: when a proc of the
// mesh is to be replaced and its host is gone, the runtime that spawned
// the mesh asks the agents of its other hosts, in turn, to hand the
// slot to an idle spare, with the slot's variables (its rank, torchrun's,
// WithProcEnv's) and CPU binding. The slot then lives on that host: its
// coordinates (and rank variables) in the mesh stay the same, while the
// ProcMesh's host for that slot, and LOCAL_RANK's meaning, are no longer
// those of its "hosts" coordinate; a host may run more procs of the mesh
// than its share. Without an idle spare on any host left, the loss goes
// to the owner as without this option. Only WithSpares.
func WithSparesAnyHost() ProcOption {
	return func(o *procOptions) error { o.sparesAnyHost = true; return nil }
}

// WithProcEnv adds environment variables ("NAME=value") to each proc, as
// env says for its point in the new mesh. They come after the runtime's
// own (MONARCH_RANK_*, RANK, MASTER_ADDR, ...), so they win.
func WithProcEnv(env func(Point) []string) ProcOption {
	return func(o *procOptions) error { o.env = env; return nil }
}

// WithWrapper runs each proc under the command line wrap gives for its
// point, the proc's own command appended: numactl --cpunodebind=N
// --membind=N, taskset -c 0-3, a profiler. An empty line runs the proc
// as it is.
func WithWrapper(wrap func(Point) []string) ProcOption {
	return func(o *procOptions) error { o.wrap = wrap; return nil }
}

// WithProcBind binds each proc to the CPUs cpus gives for its point
// (sched_setaffinity, applied by the host agent before the proc runs, so
// every thread it makes inherits it); an empty list leaves it unbound.
// A set with none of the host's CPUs fails the spawn, naming the host.
func WithProcBind(cpus func(Point) []int) ProcOption {
	return func(o *procOptions) error { o.cpus = cpus; return nil }
}

// WithCommand starts argv on every proc instead of this program: the
// procs of an SPMD job (a training script, any program), with the
// torchrun variables SpawnProcs sets. Such procs host no actors (Spawn
// on them fails) and do not see the job's bus; their output is captured
// like any proc's, and ProcMesh.Ends tells how each ended.
func WithCommand(argv ...string) ProcOption {
	return func(o *procOptions) error {
		if len(argv) == 0 || argv[0] == "" {
			return errors.New("WithCommand: no command")
		}
		o.command = append([]string(nil), argv...)
		return nil
	}
}

// WithGPUsDim names the dimension whose index a proc's
// CUDA_VISIBLE_DEVICES is (default "gpus"); a mesh without it sets none.
func WithGPUsDim(dim string) ProcOption {
	return func(o *procOptions) error { o.gpusDim = dim; return nil }
}

// WithName names the new mesh (see ProcMesh.Name): letters, digits, '_',
// '-' and '.', at most 64 of them. Default: a name SpawnProcs makes up.
func WithName(name string) ProcOption {
	return func(o *procOptions) error {
		if !validMeshName(name) {
			return fmt.Errorf("WithName %.80q: want 1 to 64 letters, digits, '_', '-' or '.'", name)
		}
		o.name = name
		return nil
	}
}

func validMeshName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// ProcEnd is how a proc ended.
type ProcEnd struct {
	Point Point // its place in the mesh SpawnProcs returned: its slot
	Proc  string
	Host  string
	// Incarnation is which of its slot's procs it was: 0 for the one
	// SpawnProcs started, 1 for the first started in its place (a
	// restart after it ended), and so on.
	Incarnation int
	// Status is its exit status as a shell reports it: the exit code, or
	// 128+n for signal n; -1 when nobody could tell (its host was lost).
	Status int
	// Stopped: it was stopped on request (ProcMesh.Stop, the job's end),
	// not of its own accord.
	Stopped bool
	Reason  string
	// At is when it ended, by its host's clock (so ends on different
	// hosts compare as well as their clocks agree); zero when nobody saw
	// it end (its host was lost).
	At time.Time
	// ErrAt is when its host's agent read the last line it wrote to
	// stderr before it ended (by the same clock, not after At): when it
	// failed, for a program whose last words are its error, as a Python
	// traceback is. Zero when it wrote none, or nobody knows.
	ErrAt time.Time
	// Dropped is how many ends, older than this one, were dropped
	// unread: Ends holds at most maxPendingEnds (and one on its way)
	// beyond one per proc.
	Dropped int
}

func (e ProcEnd) String() string {
	inc := ""
	if e.Incarnation > 0 {
		inc = fmt.Sprintf(", incarnation %d", e.Incarnation)
	}
	return fmt.Sprintf("proc %v (%s on %s%s): %s", e.Point, e.Proc, e.Host, inc, e.Reason)
}

// maxPendingEnds bounds the ends a procEnds holds beyond its channel's
// one per proc, for a mesh whose slots' procs are replaced and whose Ends
// nobody reads: past it the oldest is dropped, and counted in the next
// end delivered (ProcEnd.Dropped). Some hundred bytes each.
const maxPendingEnds = 4096

// procEnds gathers the ends of the procs one SpawnProcs started, and of
// the procs started in their places: each end is delivered once, in the
// order heard. The channel holds one end per slot; more wait in pending,
// which a goroutine (while there are any) passes on as the channel is
// read.
type procEnds struct {
	ext  Extent
	ch   chan ProcEnd
	done <-chan struct{} // the runtime's end: pending ends go unread then

	mu      sync.Mutex
	newest  []slotProc     // by rank: its slot's newest incarnation
	rank    map[string]int // a slot's newest proc -> its rank
	pending []ProcEnd      // ends the channel had no room for, oldest first
	dropped int            // ends dropped from pending, not yet told
	pumping bool           // a goroutine passes pending on
}

// slotProc is the newest proc of one slot of a procEnds.
type slotProc struct {
	id, host    string
	incarnation int
	ended       bool // its end was delivered
}

func newProcEnds(ext Extent, procs []procInfo) *procEnds {
	pe := &procEnds{ext: ext, ch: make(chan ProcEnd, len(procs)), rank: make(map[string]int, len(procs))}
	for r, p := range procs {
		pe.newest = append(pe.newest, slotProc{id: p.ID, host: p.Host})
		pe.rank[p.ID] = r
	}
	return pe
}

// ids lists the slots' newest procs.
func (pe *procEnds) ids() []string {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	out := make([]string, len(pe.newest))
	for r, s := range pe.newest {
		out[r] = s.id
	}
	return out
}

// started records where the procs run, as they reported.
func (pe *procEnds) started(procs []procInfo) {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	for r, p := range procs {
		if pe.newest[r].id == p.ID {
			pe.newest[r].host = p.Host
		}
	}
}

// replaced makes p, started in the place of old (which ended), its
// slot's newest incarnation, whose end is delivered in turn. It reports
// whether old was one of this mesh's slots' newest procs.
func (pe *procEnds) replaced(old string, p procInfo) bool {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	r, ok := pe.rank[old]
	if !ok {
		return false
	}
	delete(pe.rank, old)
	pe.newest[r] = slotProc{id: p.ID, host: p.Host, incarnation: pe.newest[r].incarnation + 1}
	pe.rank[p.ID] = r
	return true
}

// end passes on the end of one of its procs, once.
func (pe *procEnds) end(n wire.GoneNotice) {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	r, ok := pe.rank[n.Proc]
	if !ok || pe.newest[r].ended {
		return
	}
	s := &pe.newest[r]
	s.ended = true
	e := ProcEnd{Point: pe.ext.point(r), Proc: s.id, Host: s.host, Incarnation: s.incarnation, Status: n.Status, Stopped: n.Stopped, Reason: n.Reason,
		At: unixTime(n.At), ErrAt: unixTime(n.ErrAt)}
	if !pe.pumping {
		select {
		case pe.ch <- e:
			return
		default:
		}
	}
	if len(pe.pending) == maxPendingEnds {
		pe.pending = slices.Delete(pe.pending, 0, 1)
		pe.dropped++
	}
	pe.pending = append(pe.pending, e)
	if !pe.pumping {
		pe.pumping = true
		go pe.pump()
	}
}

// pump passes the pending ends on, in order, as the channel is read,
// until none is left or the runtime ends.
func (pe *procEnds) pump() {
	for {
		pe.mu.Lock()
		if len(pe.pending) == 0 {
			pe.pumping, pe.pending = false, nil
			pe.mu.Unlock()
			return
		}
		e := pe.pending[0]
		pe.pending = slices.Delete(pe.pending, 0, 1)
		e.Dropped, pe.dropped = e.Dropped+pe.dropped, 0
		pe.mu.Unlock()
		select {
		case pe.ch <- e:
		case <-pe.done:
			return
		}
	}
}

// unixTime is Unix nanoseconds ns as a time; 0 is the zero time.
func unixTime(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Ends delivers, once each and in the order they are heard, the end of
// every proc SpawnProcs started for this mesh and of every proc started
// in the place of one that ended (a restart: the slot's next
// incarnation, ProcEnd.Incarnation); a slice shares its mesh's. It holds
// one end per slot, and up to maxPendingEnds (4,096) more, so nothing is
// lost if it is read late; past that the oldest go, and the next end
// read counts them (ProcEnd.Dropped). nil for a mesh that SpawnProcs did
// not return in this process (ThisProc, a reference received).
func (p *ProcMesh) Ends() <-chan ProcEnd {
	if p.ends == nil {
		return nil
	}
	return p.ends.ch
}
