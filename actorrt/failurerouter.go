package actorrt

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
)

// failureRouter decides, in one process, who hears of a failed member of
// an actor mesh. Every mesh has one owner, fixed when it is spawned: an
// actor of the spawning process (O, an actor handle in the runtime, a
// string in tests), or the process itself (O's zero value). A failure
// reaches the owner's process, where the router passes it on:
//
//   - to the owner actor's Supervise (effSupervise), if it still runs;
//   - else, in a proc, up to the client (effEscalate): the root decides;
//   - in the client, to the fault hook (effUnhandled).
//
// It reports each member once (a member on a proc that ends is reported
// once however the end is learned), nothing of a mesh that was stopped
// (a stop is not a failure), and stops the meshes of an owner that ends
// (effStopMesh): they die with it. A member that fails in this process
// but whose mesh is owned elsewhere is sent to the owner's process
// (effForward).
//
// It is a plain state machine, shaped as raft's: each event is a type
// with its own method of the router (routerEvent), each effect a type the
// driver carries out through a method of its own (routerApplier), so that
// an event or an effect nobody handles does not compile. No I/O, clock or
// goroutines; not safe for concurrent use (its driver holds a lock around
// step). Owners are actors, only compared: a test makes its own.
type failureRouter struct {
	self   string // this process's proc id
	client bool   // this process is the client: the root of supervision
	owned  map[string]*ownedMesh
	ended  map[*actor]bool // owner actors that failed or stopped
}

// ownedMesh is the router's record of a mesh owned here: an actor mesh,
// or a proc mesh (ofProcs), whose members are its procs (its slots).
type ownedMesh struct {
	name     string
	base     Extent
	procs    []string // the proc of each member, by base rank
	ofProcs  bool     // a proc mesh: a member fails when its proc ends
	owner    *actor
	reported map[int]bool // members already reported, by base rank
	stopped  bool
	plan     *restartPlanner // the mesh's restart policy's decisions; nil: none
	goOn     bool            // the mesh goes on without a member that cannot restart (GoOnWithout)
}

func newFailureRouter(self string, client bool) *failureRouter {
	return &failureRouter{self: self, client: client, owned: map[string]*ownedMesh{}, ended: map[*actor]bool{}}
}

// routerEvent is one event a failureRouter takes: one of the ev types
// below, each passed to the router's method of its own.
type routerEvent interface {
	stepOn(r *failureRouter) []routerEffect
}

// The events a failureRouter takes.
type (
	// evOwned: this process spawned mesh id (owner: nil for the process
	// itself): an actor mesh, or a proc mesh (ofProcs: SpawnProcs, its
	// procs running this program).
	evOwned struct {
		id, name string
		base     Extent
		procs    []string
		ofProcs  bool
		owner    *actor
		plan     *restartPlanner
		goOn     bool
	}
	// evDisowned: a spawn failed; the mesh is not owned after all.
	evDisowned struct{ id string }
	// evMemberFailed: a member failed here, or a report of a member's
	// failure reached this process. ownerProc is where the mesh's owner
	// is ("" or self: here).
	evMemberFailed struct {
		f         *MeshFailure
		ownerProc string
		at        time.Time
	}
	// evProcEnded: a proc ended; members on it of meshes owned here
	// failed, unless it was stopped on request.
	evProcEnded struct {
		n  wire.GoneNotice
		at time.Time
	}
	// evMoved: ranks of mesh id live on proc now (a restart moved them
	// there from a proc that ended).
	evMoved struct {
		id    string
		ranks []int
		proc  string
	}
	// evReplaced: proc new was started in the place of old, which ended:
	// the slots of the proc meshes owned here that held old hold new.
	evReplaced struct{ old, new string }
	// evRestartDone: the restart of ranks of mesh id ended (effRestart,
	// or a restart by hand); failed holds the members whose new instance
	// failed (in its Init, or its proc), which fail again.
	evRestartDone struct {
		id     string
		ranks  []int
		failed []*MeshFailure
		final  []*MeshFailure // failed for good (their host is gone): to the owner
		at     time.Time
	}
	// evMeshStopped: mesh id was stopped on request.
	evMeshStopped struct{ id string }
	// evOwnerEnded: an owner actor failed or stopped.
	evOwnerEnded struct{ owner *actor }
)

func (ev evOwned) stepOn(r *failureRouter) []routerEffect        { r.own(ev); return nil }
func (ev evDisowned) stepOn(r *failureRouter) []routerEffect     { delete(r.owned, ev.id); return nil }
func (ev evMemberFailed) stepOn(r *failureRouter) []routerEffect { return r.memberFailed(ev) }
func (ev evProcEnded) stepOn(r *failureRouter) []routerEffect    { return r.procEnded(ev) }
func (ev evMoved) stepOn(r *failureRouter) []routerEffect        { r.moved(ev); return nil }
func (ev evReplaced) stepOn(r *failureRouter) []routerEffect     { r.replaced(ev); return nil }
func (ev evRestartDone) stepOn(r *failureRouter) []routerEffect  { return r.restartDone(ev) }
func (ev evMeshStopped) stepOn(r *failureRouter) []routerEffect  { r.meshStopped(ev.id); return nil }
func (ev evOwnerEnded) stepOn(r *failureRouter) []routerEffect   { return r.ownerEnded(ev.owner) }

// routerEffect is one thing a failureRouter asks for: one of the eff
// types below, each carried out by the applier's method of its own.
type routerEffect interface {
	applyTo(a routerApplier)
}

// routerApplier carries out a failureRouter's effects: a new kind of
// effect is a new method here, which every driver must then have.
type routerApplier interface {
	supervise(effSupervise)
	forward(effForward)
	escalate(effEscalate)
	unhandled(effUnhandled)
	stopMesh(effStopMesh)
	restartLater(effRestart)
	giveUp(effGiveUp)
}

// The effects a failureRouter asks for.
type (
	// effSupervise: give f to its mesh's owner actor.
	effSupervise struct {
		owner *actor
		f     *MeshFailure
	}
	// effForward: send f to proc, where its mesh's owner is.
	effForward struct {
		proc string
		f    *MeshFailure
	}
	// effEscalate: send f to the client.
	effEscalate struct{ f *MeshFailure }
	// effUnhandled: give f to the client's fault hook.
	effUnhandled struct{ f *MeshFailure }
	// effStopMesh: stop mesh id on its procs.
	effStopMesh struct {
		id    string
		procs []string
	}
	// effRestart: restart ranks of mesh id in place, after a delay,
	// because of f.
	effRestart struct {
		id    string
		ranks []int
		after time.Duration
		f     *MeshFailure
	}
	// effGiveUp: the failed ranks of mesh id are not restarted: their
	// stand-ins fail, for reason; missing: the mesh goes on without them
	// (GoOnWithout), which its references learn.
	effGiveUp struct {
		id      string
		ranks   []int
		reason  string
		missing bool
	}
)

func (e effSupervise) applyTo(a routerApplier) { a.supervise(e) }
func (e effForward) applyTo(a routerApplier)   { a.forward(e) }
func (e effEscalate) applyTo(a routerApplier)  { a.escalate(e) }
func (e effUnhandled) applyTo(a routerApplier) { a.unhandled(e) }
func (e effStopMesh) applyTo(a routerApplier)  { a.stopMesh(e) }
func (e effRestart) applyTo(a routerApplier)   { a.restartLater(e) }
func (e effGiveUp) applyTo(a routerApplier)    { a.giveUp(e) }

// step applies one event and returns the effects, in order.
func (r *failureRouter) step(ev routerEvent) []routerEffect { return ev.stepOn(r) }

func (r *failureRouter) own(ev evOwned) {
	r.owned[ev.id] = &ownedMesh{name: ev.name, base: ev.base, procs: ev.procs, ofProcs: ev.ofProcs, owner: ev.owner, reported: map[int]bool{}, plan: ev.plan, goOn: ev.goOn}
}

func (r *failureRouter) memberFailed(ev evMemberFailed) []routerEffect {
	if ev.ownerProc != "" && ev.ownerProc != r.self {
		return []routerEffect{effForward{ev.ownerProc, ev.f}}
	}
	return r.route(nil, ev.f, ev.at, true)
}

func (r *failureRouter) restartDone(ev evRestartDone) []routerEffect {
	m := r.owned[ev.id]
	if m == nil {
		return nil
	}
	if m.plan != nil {
		m.plan.done(ev.ranks)
	}
	for _, b := range ev.ranks {
		delete(m.reported, b)
	}
	var out []routerEffect
	for _, f := range ev.failed {
		out = r.route(out, f, ev.at, true)
	}
	for _, f := range ev.final {
		out = r.route(out, f, ev.at, false)
	}
	return out
}

func (r *failureRouter) moved(ev evMoved) {
	m := r.owned[ev.id]
	if m == nil {
		return
	}
	procs := slices.Clone(m.procs)
	for _, b := range ev.ranks {
		if b >= 0 && b < len(procs) {
			procs[b] = ev.proc
		}
	}
	m.procs = procs
}

// procEnded fails the members on a proc that ended: those of the actor
// meshes owned here first, then the proc meshes' slot that held it,
// unless an actor mesh's restart policy is starting a proc in its place
// (the slot's next incarnation, evReplaced).
func (r *failureRouter) procEnded(ev evProcEnded) []routerEffect {
	if ev.n.Stopped {
		return nil
	}
	var out []routerEffect
	replacing := false
	ids := r.ownedIDs()
	for _, ofProcs := range []bool{false, true} {
		for _, id := range ids {
			m := r.owned[id]
			if m.stopped || m.ofProcs != ofProcs || (ofProcs && replacing) {
				continue
			}
			var fs []*MeshFailure
			for b, p := range m.procs {
				if p != ev.n.Proc || m.reported[b] {
					continue
				}
				fs = append(fs, endFailure(id, m, b, ev.n))
			}
			out = r.routeAll(out, m, fs, ev.at)
			for _, f := range fs {
				replacing = replacing || (m.plan != nil && m.plan.busy[f.Base])
			}
		}
	}
	return out
}

// endFailure is the failure of member b of m, whose proc ended.
func endFailure(id string, m *ownedMesh, b int, n wire.GoneNotice) *MeshFailure {
	pt := m.base.point(b)
	f := &MeshFailure{Mesh: m.name, MeshID: id, Proc: n.Proc, Dims: m.base.dims, Coords: pt.coords, Base: b}
	if m.ofProcs {
		f.ProcLost, f.Reason = true, n.Reason
	} else {
		f.ActorID, f.Reason = m.name+"["+strconv.Itoa(b)+"]", "its proc ended: "+n.Reason
	}
	return f
}

func (r *failureRouter) replaced(ev evReplaced) {
	for _, m := range r.owned {
		if !m.ofProcs {
			continue
		}
		for b, p := range m.procs {
			if p != ev.old {
				continue
			}
			procs := slices.Clone(m.procs) // shared with the mesh's spawn
			procs[b] = ev.new
			m.procs = procs
			delete(m.reported, b)
		}
	}
}

func (r *failureRouter) meshStopped(id string) {
	if m := r.owned[id]; m != nil {
		m.stopped = true
	}
}

func (r *failureRouter) ownerEnded(owner *actor) []routerEffect {
	r.ended[owner] = true
	var out []routerEffect
	for _, id := range r.ownedIDs() {
		m := r.owned[id]
		// A proc mesh outlives the actor that spawned it, as before it
		// was supervised: its procs are stopped by Stop or the job's end.
		if m.owner == owner && !m.stopped && !m.ofProcs {
			m.stopped = true
			out = append(out, effStopMesh{id, uniq(m.procs)})
		}
	}
	return out
}

// route passes a failure of a mesh on to whoever decides about it here:
// its restart policy, when it has one and the member may restart
// (restartable: not a failure for good), else its owner.
func (r *failureRouter) route(out []routerEffect, f *MeshFailure, at time.Time, restartable bool) []routerEffect {
	m := r.owned[f.MeshID]
	if m == nil {
		return r.toOwner(out, nil, f) // an escalation from elsewhere
	}
	if m.reported[f.Base] || m.stopped {
		return out
	}
	if m.plan == nil || !restartable {
		m.reported[f.Base] = true
		return r.lost(out, m, f)
	}
	return r.routeAll(out, m, []*MeshFailure{f}, at)
}

// routeAll passes on members of m that failed together (one, or those on
// a proc that ended), not reported yet: one decision of m's restart
// policy for them all, or each to the owner.
func (r *failureRouter) routeAll(out []routerEffect, m *ownedMesh, fs []*MeshFailure, at time.Time) []routerEffect {
	if len(fs) == 0 {
		return out
	}
	ranks := make([]int, len(fs))
	for i, f := range fs {
		m.reported[f.Base] = true
		ranks[i] = f.Base
	}
	if m.plan == nil {
		for _, f := range fs {
			out = r.lost(out, m, f)
		}
		return out
	}
	d, absorbed := m.plan.failed(ranks, at)
	switch {
	case absorbed:
		return out // their groups' restarts, waiting or under way, restart them
	case d.ranks != nil:
		return append(out, effRestart{fs[0].MeshID, d.ranks, d.after, fs[0]})
	}
	for _, f := range fs {
		if !m.goOn {
			out = append(out, effGiveUp{f.MeshID, []int{f.Base}, f.Reason + "; " + d.escalate, false})
		}
		g := *f
		g.Reason += "; not restarted: " + d.escalate
		out = r.lost(out, m, &g)
	}
	return out
}

// lost passes on the failure of a member of m that is not restarted: to
// the owner, and, in a mesh that goes on without such members (an actor
// mesh's GoOnWithout), the member is missing from now on (effGiveUp with
// missing) and the failure says so (GoesOn), once.
func (r *failureRouter) lost(out []routerEffect, m *ownedMesh, f *MeshFailure) []routerEffect {
	if m.goOn && !m.ofProcs {
		g := *f
		g.GoesOn = true
		g.Reason += "; its mesh goes on without it"
		out = append(out, effGiveUp{f.MeshID, []int{f.Base}, g.Reason, true})
		f = &g
	}
	return r.toOwner(out, m, f)
}

// toOwner passes f on to m's owner actor, if it still runs; else (owned
// by this process, by an actor that ended, or not owned here: an
// escalation) the root decides.
func (r *failureRouter) toOwner(out []routerEffect, m *ownedMesh, f *MeshFailure) []routerEffect {
	if m != nil && m.owner != nil && !r.ended[m.owner] {
		return append(out, effSupervise{m.owner, f})
	}
	if !r.client {
		return append(out, effEscalate{f})
	}
	return append(out, effUnhandled{f})
}

// restartable picks, for a restart by hand of ranks of mesh id, those
// that failed and were reported and are not being restarted by the
// policy; the others (running, or restarting) are left alone. None is
// ErrNotFailed. When some are picked, the policy (if any) starts afresh:
// the owner took over.
func (r *failureRouter) restartable(id string, ranks []int) ([]int, error) {
	m := r.owned[id]
	if m == nil || m.stopped {
		return nil, fmt.Errorf("%w: the mesh is stopped, or not owned by proc %s (only its owner restarts it)", ErrStopped, r.self)
	}
	var failed []int
	for _, b := range ranks {
		if m.reported[b] && (m.plan == nil || !m.plan.busy[b]) {
			failed = append(failed, b)
		}
	}
	if len(failed) == 0 {
		return nil, fmt.Errorf("%w: no failed member among %s (running, or restarting by the mesh's policy)", ErrNotFailed, someMembers(m.name, ranks))
	}
	if m.plan != nil {
		m.plan.manual()
	}
	return failed, nil
}

// someMembers names the members of mesh name at ranks, the first few of
// many.
func someMembers(name string, ranks []int) string {
	names := make([]string, len(ranks))
	for i, b := range ranks {
		names[i] = name + "[" + strconv.Itoa(b) + "]"
	}
	return someOf(names)
}

// ownedIDs lists the owned meshes in a stable order, so that effects come
// out in one.
func (r *failureRouter) ownedIDs() []string {
	ids := make([]string, 0, len(r.owned))
	for id := range r.owned {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
