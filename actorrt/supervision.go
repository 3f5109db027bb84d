package actorrt

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// Supervision. Every actor mesh has one owner: the actor whose endpoint (or
// Supervise) spawned it, or else the client. When a member fails (an
// endpoint error or panic that no caller waits for, or the end of its
// proc) the owner hears of it as a *MeshFailure:
//
//   - an owner actor with a method Supervise(ctx *Context, f *MeshFailure)
//     bool gets it in its mailbox; true means handled, false means the owner
//     fails too, and its own owner hears of that;
//   - an owner actor without Supervise fails too (nothing goes unreported);
//   - the client calls its fault hook (WithFaultHook).
//
// A failed actor answers every later call with ErrActorFailed, and the
// meshes it owned are stopped. Ownership never moves: a failure on a slice,
// or on a mesh passed to another actor, goes to the mesh's creator.

// MeshFailure reports a failed member of an actor mesh, or a proc of a
// proc mesh that ended (ProcLost): its process died, or its host was
// lost, and no restart policy of a mesh on it replaced it.
type MeshFailure struct {
	Mesh    string      `msgpack:"mesh"`   // the mesh's name
	MeshID  string      `msgpack:"id"`     // the mesh's id
	ActorID string      `msgpack:"actor"`  // the failed member, as mesh[rank]; "" for a proc lost
	Proc    string      `msgpack:"proc"`   // its proc
	Reason  string      `msgpack:"reason"` // what happened
	Dims    Dims        `msgpack:"dims"`   // the mesh's extent
	Coords  []int       `msgpack:"coords"` // the member's rank, per dimension
	Base    int         `msgpack:"base"`   // the member's row-major rank
	Err     *ActorError `msgpack:"err"`    // the endpoint's error or panic, if that was the cause
	// ProcLost: the mesh is a ProcMesh (of this program's procs, not
	// WithCommand's), and its member Proc ended.
	ProcLost bool `msgpack:"proclost,omitempty"`
	// GoesOn: the mesh was spawned to go on without a member that cannot
	// be restarted (SpawnOptions.GoOnWithout), and goes on without this
	// one: it is missing until restarted by hand. Such a failure is news,
	// not an end: an owner's Supervise that does not handle it, or a
	// fault hook that returns an error for it, only logs it.
	GoesOn bool `msgpack:"goeson,omitempty"`
}

// Rank is the failed member's rank in its mesh.
func (f *MeshFailure) Rank() Point {
	ext, err := NewExtent(f.Dims)
	if err != nil || len(f.Coords) != len(ext.dims) {
		return Point{}
	}
	return Point{ext: ext, coords: f.Coords}
}

// Error describes the failure; a MeshFailure is an error, so a hook can
// return it as is.
func (f *MeshFailure) Error() string {
	if f.ProcLost {
		return fmt.Sprintf("proc mesh %s: proc %s %v ended: %s", f.Mesh, f.Proc, f.Rank(), f.Reason)
	}
	return fmt.Sprintf("mesh %s: actor %s %v on proc %s failed: %s", f.Mesh, f.ActorID, f.Rank(), f.Proc, f.Reason)
}

func (f *MeshFailure) String() string { return f.Error() }

// WithFaultHook sets the client's fault hook: it is called, once per
// failure, for every MeshFailure that reaches the client: a failure of a
// mesh the client owns, or one no owner handled. Returning nil ignores
// the failure; returning an error means it is unhandled: the client
// prints it to stderr, stops every proc it started and exits with status
// 1. The default hook returns the failure, and the client then also
// prints how to take failures over (defaultHookAdvice); a nil hook
// ignores every failure. The hook runs on a goroutine of its own, one
// failure at a time, while the program runs: once its function has
// returned the job is ending, and a failure found then (most often an end
// the job's own stop caused, such as a restart it cut short) goes to the
// system log, not to the hook.
func WithFaultHook(hook func(*MeshFailure) error) Option {
	return func(o *options) error {
		if hook == nil {
			hook = func(*MeshFailure) error { return nil }
		}
		o.faultHook, o.hookSet = hook, true
		return nil
	}
}

func defaultFaultHook(f *MeshFailure) error { return f }

// defaultHookAdvice follows an unhandled failure the default hook let
// end the job.
const defaultHookAdvice = "monarch: the default fault hook ends the job at any failure no owner handles: " +
	"actorrt.WithFaultHook takes them over in the program, a Supervise method in an owner actor, " +
	"a RestartPolicy (actorrt.SpawnWith) restarts failed members in place"

// supervision drives this process's failureRouter: it records the meshes
// spawned here, feeds it the failures and ends that reach this process,
// and carries out where it sends them. Safe for concurrent use.
type supervision struct {
	rt *core

	mu     sync.Mutex
	router *failureRouter
	refs   map[string]*meshRef // the meshes owned here, to mark them stopped
	// procMeshes are the proc meshes owned here with a restart policy
	// (WithProcRestart), whose procs a restart replaces.
	procMeshes map[string]*ProcMesh
	// stepped is closed (and replaced) at each step: awaitSettled looks
	// again then.
	stepped chan struct{}
}

func newSupervision(rt *core, root bool) *supervision {
	return &supervision{rt: rt, router: newFailureRouter(rt.procID, root), refs: map[string]*meshRef{}}
}

// step runs one event through the router and carries out its effects,
// without the lock.
func (s *supervision) step(ev routerEvent) {
	s.mu.Lock()
	effects := s.router.step(ev)
	if s.stepped != nil {
		close(s.stepped)
		s.stepped = nil
	}
	var stopped []*meshRef
	for _, e := range effects {
		switch e := e.(type) {
		case effStopMesh:
			if ref := s.refs[e.id]; ref != nil {
				stopped = append(stopped, ref)
			}
		case effGiveUp:
			// Marked with the step, so that whoever sees it settled
			// (awaitSettled) sees the mark.
			if ref := s.refs[e.id]; ref != nil && e.missing {
				ref.markMissing(e.ranks, e.reason)
			}
		}
	}
	s.mu.Unlock()
	s.rt.role.supervised(ev, effects)
	for _, ref := range stopped {
		ref.stopped.Store(true)
	}
	for _, e := range effects {
		e.applyTo(s)
	}
}

// The router's effects (routerApplier), carried out.

func (s *supervision) supervise(e effSupervise) { e.owner.enqueue(envelope{failure: e.f}) }
func (s *supervision) forward(e effForward)     { s.send(e.proc, e.f) }
func (s *supervision) escalate(e effEscalate)   { s.send(jobenv.ClientID, e.f) }
func (s *supervision) unhandled(e effUnhandled) { s.rt.role.unhandled(e.f) }

func (s *supervision) stopMesh(e effStopMesh) {
	stopOn(s.rt, e.id, e.procs)
	s.rt.role.registry().free(e.id)
}

func (s *supervision) giveUp(e effGiveUp) {
	if ref := s.ref(e.id); ref != nil {
		giveUpOn(s.rt, ref, e.ranks, e.reason, e.missing) // marked missing in step
	}
}

func (s *supervision) send(proc string, f *MeshFailure) {
	if err := s.rt.sendControl(proc, wire.OpFailure, 0, f); err != nil {
		s.rt.log.Error().Err(err).Str("failure", f.Error()).Msg("cannot report a failure to its owner")
	}
}

// own records that this process (owner nil) or actor owner owns ref,
// whose restart policy plan carries out (nil: none); goOn: it goes on
// without members that cannot restart (GoOnWithout).
func (s *supervision) own(ref *meshRef, base Extent, owner *actor, plan *restartPlanner, goOn bool) {
	s.mu.Lock()
	s.refs[ref.id] = ref
	s.mu.Unlock()
	s.step(evOwned{id: ref.id, name: ref.name, base: base, procs: ref.procs, owner: owner, plan: plan, goOn: goOn})
}

// ownProcs has the router watch proc mesh id, whose procs run this
// program, for owner (nil: this process): a proc of it that ends, not on
// request, is a failure of the mesh, unless a restart puts a proc in its
// place (plan: the mesh's own, WithProcRestart). A proc that ended
// before this is taken as ending now.
func (s *supervision) ownProcs(id string, pm *ProcMesh, owner *actor, plan *restartPlanner) {
	ids := make([]string, len(pm.procs))
	for i, p := range pm.procs {
		ids[i] = p.ID
	}
	if plan != nil {
		s.mu.Lock()
		if s.procMeshes == nil {
			s.procMeshes = map[string]*ProcMesh{}
		}
		s.procMeshes[id] = pm
		s.mu.Unlock()
	}
	s.step(evOwned{id: id, name: pm.name, base: pm.reg.base, procs: ids, ofProcs: true, owner: owner, plan: plan})
	for _, p := range ids {
		if n, ok := s.rt.health.notice(p); ok {
			s.step(evProcEnded{n: n, at: time.Now()})
		}
	}
}

func (s *supervision) ref(id string) *meshRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs[id]
}

// restartLater carries out a restart the policy decided: after its
// backoff, the members on live procs are restarted there; those whose
// proc ended are spawned on a new proc their host's agent starts in its
// place. Then the router hears how it went. The restart is logged, as its
// failure would have been.
func (s *supervision) restartLater(e effRestart) {
	s.mu.Lock()
	pm := s.procMeshes[e.id]
	s.mu.Unlock()
	if pm != nil {
		s.replaceLater(e, pm)
		return
	}
	rt := s.rt
	if rt.closing.Load() {
		return // the job is ending: its procs are being stopped
	}
	rt.log.Warn().Str("mesh", e.f.Mesh).Str("failure", e.f.Error()).Ints("ranks", e.ranks).Dur("after", e.after).
		Msg("restarting in place, by the mesh's restart policy")
	time.AfterFunc(e.after, func() {
		ref := s.ref(e.id)
		if ref == nil || ref.stopped.Load() || rt.closing.Load() {
			return
		}
		cause := e.f.ActorID + " failed: " + e.f.Reason
		why := map[int]error{} // the ranks whose restart failed
		forGood := map[int]bool{}
		live, dead := s.splitByProcEnded(ref, e.ranks)
		if len(live) > 0 {
			errs, err := restartMembers(rt.ctx, rt, ref, live, cause, false)
			for _, b := range live {
				if err != nil {
					why[b] = err
				} else if errs[b] != nil {
					why[b] = errs[b]
				}
			}
		}
		s.moveToNewProcs(rt.ctx, ref, dead, why, forGood)
		ev := evRestartDone{id: e.id, ranks: e.ranks, at: time.Now()}
		for _, b := range e.ranks {
			if why[b] == nil {
				continue
			}
			g := *e.f
			g.ActorID, g.Base, g.Coords, g.Proc = ref.name+"["+strconv.Itoa(b)+"]", b, s.coords(e.id, b), ref.procOf(b)
			g.Reason, g.Err = "its restart failed: "+why[b].Error(), nil
			if forGood[b] {
				ev.final = append(ev.final, &g)
			} else {
				ev.failed = append(ev.failed, &g)
			}
		}
		s.step(ev)
	})
}

// procsEnded is the ranks of a mesh whose proc ended, by that proc, the
// procs in the order their first rank came.
type procsEnded struct {
	ranks map[string][]int
	order []string
}

// splitByProcEnded splits ranks of ref into those on live procs and those
// whose proc ended.
func (s *supervision) splitByProcEnded(ref *meshRef, ranks []int) (live []int, dead procsEnded) {
	rt := s.rt
	dead.ranks = map[string][]int{}
	for _, b := range ranks {
		p := ref.procOf(b)
		if rt.health.goneErr(p) == nil {
			live = append(live, b)
			continue
		}
		if dead.ranks[p] == nil {
			dead.order = append(dead.order, p)
		}
		dead.ranks[p] = append(dead.ranks[p], b)
	}
	return live, dead
}

// moveToNewProcs restarts the members of dead on the procs started in
// their ended procs' places (one per slot, shared with every mesh that
// had members there: spawner.respawn), and records in why each rank
// whose restart failed; forGood, those with no new proc (its host is
// gone).
func (s *supervision) moveToNewProcs(ctx context.Context, ref *meshRef, dead procsEnded, why map[int]error, forGood map[int]bool) {
	rt := s.rt
	for _, old := range dead.order {
		ranks := dead.ranks[old]
		p, err := rt.procs.respawn(ctx, old, ref.agentOf(ranks[0]))
		if err != nil {
			for _, b := range ranks {
				why[b], forGood[b] = fmt.Errorf("no new proc in the place of %s: %w", old, err), true
			}
			continue
		}
		rt.log.Info().Str("mesh", ref.name).Str("old", old).Str("proc", p.ID).Ints("ranks", ranks).Msg("a new proc in the place of one that ended")
		errs, err := rt.spawnMoved(ctx, ref, ranks, p)
		for _, b := range ranks {
			if err != nil {
				why[b] = err
			} else if errs[b] != nil {
				why[b] = errs[b]
			}
		}
	}
}

// replaceLater carries out a restart that proc mesh pm's policy decided:
// after its backoff, each failed proc is replaced by one its host agent
// starts in its place (the slot's next incarnation), unless a restart of
// an actor mesh on it did so already. A proc not replaced (its host is
// gone) fails for good, to the mesh's owner.
func (s *supervision) replaceLater(e effRestart, pm *ProcMesh) {
	rt := s.rt
	rt.log.Warn().Str("mesh", e.f.Mesh).Str("failure", e.f.Error()).Ints("ranks", e.ranks).Dur("after", e.after).
		Msg("replacing procs, by the proc mesh's restart policy")
	time.AfterFunc(e.after, func() {
		ev := evRestartDone{id: e.id, ranks: e.ranks}
		for _, b := range e.ranks {
			old := pm.proc(b)
			p, err := rt.procs.respawn(rt.ctx, old.ID, old.Agent)
			if err != nil {
				g := *e.f
				g.Base, g.Coords, g.Proc = b, pm.reg.base.point(b).coords, old.ID
				g.Reason = "its restart failed: no new proc in the place of " + old.ID + ": " + err.Error()
				ev.final = append(ev.final, &g)
				continue
			}
			rt.log.Info().Str("mesh", pm.name).Str("old", old.ID).Str("proc", p.ID).Int("rank", b).Msg("a new proc in the place of one that ended")
		}
		ev.at = time.Now()
		s.step(ev)
	})
}

// replacing reports whether a restart policy of a mesh owned here (an
// actor mesh's, or a proc mesh's own) decided to start a proc in the
// place of proc, which ended, and that restart has not ended.
func (s *supervision) replacing(proc string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.router.owned {
		if m.plan == nil || m.stopped {
			continue
		}
		for b, p := range m.procs {
			if p == proc && m.plan.busy[b] {
				return true
			}
		}
	}
	return false
}

// coords are base rank b's coordinates in mesh id.
func (s *supervision) coords(id string, b int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.router.owned[id]; m != nil {
		return m.base.point(b).coords
	}
	return nil
}

// restartByHand picks the ranks of mesh id to restart by hand: those
// that failed (see failureRouter.restartable).
func (s *supervision) restartByHand(id string, ranks []int) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.router.restartable(id, ranks)
}

// restartDone tells the router a restart by hand of ranks of mesh id
// ended: their later failures are reported again.
func (s *supervision) restartDone(id string, ranks []int, failed []*MeshFailure) {
	s.step(evRestartDone{id: id, ranks: ranks, failed: failed, at: time.Now()})
}

// meshInfo is where the members of mesh id, owned here, are.
func (s *supervision) meshInfo(id string) (*meshInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := s.refs[id]
	if ref == nil {
		return nil, false
	}
	return s.meshInfoOf(ref), true
}

// disown forgets a mesh whose spawn failed.
func (s *supervision) disown(id string) {
	s.mu.Lock()
	delete(s.refs, id)
	s.mu.Unlock()
	s.step(evDisowned{id})
}

// memberFailed routes a failure: of a member here (its mesh owned on
// ownerProc), or a report that reached this process ("" for ownerProc).
func (s *supervision) memberFailed(f *MeshFailure, ownerProc string) {
	s.step(evMemberFailed{f: f, ownerProc: ownerProc, at: time.Now()})
}

// procEnded fails the members of meshes owned here that lived on a proc
// that ended.
func (s *supervision) procEnded(n wire.GoneNotice) { s.step(evProcEnded{n: n, at: time.Now()}) }

// meshStopped records a stop on request: not a failure.
func (s *supervision) meshStopped(id string) { s.step(evMeshStopped{id}) }

// ownerEnded stops the meshes actor a owns: they die with their owner.
func (s *supervision) ownerEnded(a *actor) { s.step(evOwnerEnded{a}) }
