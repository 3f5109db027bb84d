package actorrt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// spawner is how a runtime starts procs through host agents and follows
// them: it names each new proc, asks an agent for a free port or to
// start a proc in an ended one's place, and passes each proc's end on to
// the ProcMesh that started it.
//
// A proc started in an ended one's place is the same slot of its proc
// mesh, a new incarnation: this runtime starts at most one per ended
// proc, however many of its meshes had members there (their restarts
// share it), and every ProcMesh value of this runtime reaches the slot's
// newest incarnation (current). The runtime that started it announces it
// (OpReplaced) on the deaths subject of the slot's host agent, which
// every runtime holding procs of that agent watches: theirs (a ProcMesh
// passed to an actor, or one an actor spawned) reach it too (learn).
type spawner struct {
	rt   *core
	seq  atomic.Uint64 // procs named here
	ends sync.Map      // proc id -> *procEnds: who hears of its end

	// successors maps a proc that ended to the proc started in its
	// place (a procInfo), once it is ready. A chain grows a link per
	// replacement of a slot: one entry per proc this runtime replaced.
	successors sync.Map
	nReplaced  atomic.Int32 // successors' size: none is the common case
	// adoptable holds, by proc id, the slots that a spare of another
	// host may take when theirs is lost (WithSparesAnyHost): a *slotSpec.
	adoptable sync.Map
	mu        sync.Mutex
	replacing map[string]*replacement // ended proc -> its replacement under way
}

// replacement is a respawn under way, which later askers for the same
// ended proc wait for rather than start another.
type replacement struct {
	done chan struct{}
	p    procInfo
	err  error
}

// current is the newest incarnation of p's slot known here: p itself,
// unless p ended and a proc was started in its place (and so on).
func (sp *spawner) current(p procInfo) procInfo {
	if sp.nReplaced.Load() == 0 {
		return p
	}
	for {
		v, ok := sp.successors.Load(p.ID)
		if !ok {
			return p
		}
		p = v.(procInfo)
	}
}

// newProcID names a proc that host agent agent starts. Its id carries
// the key of that agent's host (jobenv.HostKey): one started by this
// proc's own agent (ThisHost) inherits this proc's, and one another
// agent starts gets that agent's id, before this proc's id without its
// key and a number. The part after the key is unique in the job: the
// client's procs are c-1, c-2, ..., theirs c-1-1, ...
func (sp *spawner) newProcID(agent string) string {
	rt := sp.rt
	n := "-" + strconv.FormatUint(sp.seq.Add(1), 10)
	if agent == rt.procID || !jobenv.ValidHostKey(agent) {
		return rt.procID + n
	}
	return agent + "." + jobenv.LocalPart(rt.procID) + n
}

// watchEnds has the ends of pe's procs passed on to it, and of the procs
// started in their places.
func (sp *spawner) watchEnds(pe *procEnds) {
	pe.done = sp.rt.ctx.Done()
	for _, id := range pe.ids() {
		sp.ends.Store(id, pe)
	}
}

// endOf passes a proc's end on to the mesh that SpawnProcs started it
// for, if it was here. The end of a proc that was not stopped keeps its
// entry, for the proc started in its place (follow): one entry per slot.
func (sp *spawner) endOf(n wire.GoneNotice) {
	v, ok := sp.ends.Load(n.Proc)
	if !ok {
		return
	}
	if n.Stopped {
		sp.ends.Delete(n.Proc)
	}
	v.(*procEnds).end(n)
}

// follow records p, started in the place of old: the slot's newest
// incarnation, which current reaches, and whose end goes where old's
// went.
func (sp *spawner) follow(old string, p procInfo) {
	sp.nReplaced.Add(1)
	if v, ok := sp.ends.LoadAndDelete(old); ok && v.(*procEnds).replaced(old, p) {
		sp.ends.Store(p.ID, v)
	}
}

// freePort asks agent, on host, for a port free on its host and the
// host's address: the MASTER_ADDR and MASTER_PORT of a new mesh whose
// rank 0 is there. (host names it in the error: users know hosts by
// name, not by their agents' ids.)
func (sp *spawner) freePort(ctx context.Context, agent, host string) (wire.FreePort, error) {
	rt := sp.rt
	ext, _ := NewExtent(Dims{{"agents", 1}})
	fut := newFuture[ValueMesh[wire.FreePort]](label{mesh: "free port on " + agent})
	port, err := rt.ports.open(newCallPort[wire.FreePort](fut, ext), []string{agent})
	if err != nil {
		return wire.FreePort{}, err
	}
	defer rt.ports.close(port)
	if err := rt.sendControl(agent, wire.OpFreePort, port, nil); err != nil {
		return wire.FreePort{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, rt.opts.spawnTimeout)
	defer cancel()
	v, err := fut.Get(ctx)
	if err != nil {
		return wire.FreePort{}, fmt.Errorf("ask the host agent on %s for a free port: %w", host, err)
	}
	return v.Values()[0], nil
}

// respawn returns the proc in the place of proc old, which ended: its
// slot's newest incarnation if that one runs, else one started now by
// its host agent (the same bootstrap, a new id). The meshes that had
// members on old share the one replacement: a second asker while it
// starts waits for it. It returns once the new proc is ready, at most
// the spawn timeout or until ctx ends.
func (sp *spawner) respawn(ctx context.Context, old, agent string) (procInfo, error) {
	// A slot replaced already, its new proc gone too, is replaced again:
	// its agent starts the newest incarnation's successor.
	if cur := sp.current(procInfo{ID: old, Agent: agent}); cur.ID != old {
		if sp.rt.health.goneErr(cur.ID) == nil {
			return cur, nil
		}
		old, agent = cur.ID, cur.Agent
	}
	sp.mu.Lock()
	if r := sp.replacing[old]; r != nil {
		sp.mu.Unlock()
		select {
		case <-r.done:
			return r.p, r.err
		case <-ctx.Done():
			return procInfo{}, fmt.Errorf("waiting for the proc started in the place of %s: %w", old, ctx.Err())
		}
	}
	if sp.replacing == nil {
		sp.replacing = map[string]*replacement{}
	}
	r := &replacement{done: make(chan struct{})}
	sp.replacing[old] = r
	sp.mu.Unlock()

	r.p, r.err = sp.start(ctx, old, agent)
	if r.err == nil {
		sp.followSlot(old, r.p.ID)
		sp.successors.Store(old, r.p)
		sp.follow(old, r.p)
		sp.rt.sup.step(evReplaced{old: old, new: r.p.ID})
		// On old's agent's subject, which old's holders watch: a spare of
		// another host may have taken a lost host's slot.
		sp.announce(agent, wire.ReplacedNotice{Old: old, New: r.p.ID, Agent: r.p.Agent, Host: r.p.Host, PID: r.p.PID})
	}
	sp.mu.Lock()
	delete(sp.replacing, old) // after a failure, the next asker tries again
	sp.mu.Unlock()
	close(r.done)
	return r.p, r.err
}

// start has old's host agent start a proc in its place, and returns it
// once it is ready; when that host is gone, a spare of another host of
// old's mesh takes old's slot, where the mesh allows it.
func (sp *spawner) start(ctx context.Context, old, agent string) (procInfo, error) {
	if err := sp.rt.health.goneErr(agent); err != nil {
		if spec, ok := sp.adoptable.Load(old); ok {
			return sp.adoptElsewhere(ctx, old, agent, spec.(*slotSpec), err)
		}
		return procInfo{}, fmt.Errorf("its host is gone: %w", err)
	}
	return sp.ask(ctx, old, agent, nil)
}

// ask has agent start a proc in old's place (or, with adopt, hand old's
// slot to a spare), and returns it once it is ready.
func (sp *spawner) ask(ctx context.Context, old, agent string, adopt *wire.AdoptSlot) (procInfo, error) {
	rt := sp.rt
	p := procInfo{ID: sp.newProcID(agent), Agent: agent}
	ext, _ := NewExtent(Dims{{"procs", 1}})
	fut := newFuture[ValueMesh[wire.ProcReady]](label{mesh: "respawn " + old})
	port, err := rt.ports.open(newCallPort[wire.ProcReady](fut, ext), []string{p.ID, agent})
	if err != nil {
		return procInfo{}, err
	}
	defer rt.ports.close(port)
	rt.health.started([]procInfo{p}, true)
	if err := rt.sendControl(agent, wire.OpRespawnProc, port, &wire.RespawnProcReq{Old: old, New: p.ID, Proc: rt.procID, Port: port, Adopt: adopt}); err != nil {
		return procInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, rt.opts.spawnTimeout)
	defer cancel()
	ready, err := fut.Get(ctx)
	if err != nil {
		return procInfo{}, err
	}
	rd := ready.Values()[0]
	if rd.Proc != "" && rd.Proc != p.ID {
		// A spare took old's slot, or another process had old
		// replaced first: the agent named old's successor, and none
		// was started under the id asked for.
		if !wire.ValidID(rd.Proc) {
			return procInfo{}, fmt.Errorf("the host agent of %s named its successor %.40q", old, rd.Proc)
		}
		p.ID = rd.Proc
		rt.health.started([]procInfo{p}, false)
	}
	p.Host, p.PID = rd.Host, rd.PID
	rt.role.procsStarted(&ProcMesh{rt: rt, reg: wholeRegion(Extent{}), procs: []procInfo{p}, replaces: old})
	return p, nil
}

// slotSpec is what a spare of another host needs to take a slot of a
// proc mesh (WithSparesAnyHost).
type slotSpec struct {
	mesh   string
	rank   int
	env    []string
	cpus   []int
	agents []string // the mesh's hosts' agents
}

// allowAdopt records the slots of the procs reqs started (by agent) for
// mesh name, so that a spare of another of agents may take one whose
// host is lost.
func (sp *spawner) allowAdopt(name string, reqs map[string]*wire.SpawnProcsReq, agents []string) {
	for _, req := range reqs {
		for i, id := range req.IDs {
			s := &slotSpec{mesh: name, rank: req.Ranks[i], env: req.Env[i], agents: agents}
			if req.CPUs != nil {
				s.cpus = req.CPUs[i]
			}
			sp.adoptable.Store(id, s)
		}
	}
}

// followSlot moves what the slot of proc old needs to be adopted on to
// the proc in its place.
func (sp *spawner) followSlot(old, new string) {
	if s, ok := sp.adoptable.LoadAndDelete(old); ok {
		sp.adoptable.Store(new, s)
	}
}

// adoptElsewhere asks the agents of s's other hosts, in turn, to hand
// old's slot to a spare (old's host, agent, is lost: why).
func (sp *spawner) adoptElsewhere(ctx context.Context, old, agent string, s *slotSpec, why error) (procInfo, error) {
	errs := []error{fmt.Errorf("its host is gone: %w", why)}
	for _, a := range s.agents {
		if a == agent || sp.rt.health.goneErr(a) != nil {
			continue
		}
		p, err := sp.ask(ctx, old, a, &wire.AdoptSlot{Mesh: s.mesh, Rank: s.rank, Env: s.env, CPUs: s.cpus})
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	return procInfo{}, fmt.Errorf("no spare of another host took its slot: %w", errors.Join(errs...))
}

// announce tells the holders of procs of agent, n.Old's, that n.New (a
// proc of n.Agent) took n.Old's place, now and again after a while, as a
// proc's end is.
func (sp *spawner) announce(agent string, n wire.ReplacedNotice) {
	sp.rt.announceAgain(func() {
		sp.rt.announce(agent, wire.OpReplaced, &n, n.New, "cannot announce a proc started in an ended one's place")
	})
}

// learn records that proc n.New was started in the place of n.Old, as
// the runtime that started it announced: this runtime's ProcMesh values
// reach it from then on, and a restart here of a member that was on Old
// meets it (respawn). A slot's chain never loops: a notice whose New is
// Old or one of Old's predecessors here is dropped, as is a repeat.
func (sp *spawner) learn(n wire.ReplacedNotice) {
	// Only a proc heard of here has a slot to follow: a notice naming
	// any other (a buggy or forged peer) would grow the successors
	// without bound.
	if heard, _ := sp.rt.health.knows(n.Old); !heard {
		return
	}
	p := procInfo{ID: n.New, Agent: n.Agent, Host: n.Host, PID: n.PID}
	for q := p.ID; ; {
		if q == n.Old {
			sp.rt.log.Warn().Str("proc", n.New).Str("old", n.Old).Msg("dropped a notice of a proc started in an ended one's place: its slot would loop")
			return
		}
		v, ok := sp.successors.Load(q)
		if !ok {
			break
		}
		q = v.(procInfo).ID
	}
	if _, known := sp.successors.LoadOrStore(n.Old, p); known {
		return
	}
	sp.follow(n.Old, p)
	sp.rt.health.started([]procInfo{p}, false)
	sp.rt.sup.step(evReplaced{old: n.Old, new: n.New})
}
