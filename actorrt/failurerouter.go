package actorrt

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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
// It is a plain state machine: events in (step), effects out, which the
// runtime carries out. No I/O, clock or goroutines; not safe for
// concurrent use (its driver holds a lock around step).
type failureRouter[O comparable] struct {
	self   string // this process's proc id
	client bool   // this process is the client: the root of supervision
	owned  map[string]*ownedMesh[O]
	ended  map[O]bool // owner actors that failed or stopped
}

// ownedMesh is the router's record of a mesh owned here.
type ownedMesh[O comparable] struct {
	name     string
	base     Extent
	procs    []string // the proc of each member, by base rank
	owner    O
	reported map[int]bool // members already reported, by base rank
	stopped  bool
	plan     *restartPlanner // the mesh's restart policy's decisions; nil: none
}

func newFailureRouter[O comparable](self string, client bool) *failureRouter[O] {
	return &failureRouter[O]{self: self, client: client, owned: map[string]*ownedMesh[O]{}, ended: map[O]bool{}}
}

// The events a failureRouter takes.
type (
	// evOwned: this process spawned mesh id (owner: the zero O for the
	// process itself).
	evOwned[O comparable] struct {
		id, name string
		base     Extent
		procs    []string
		owner    O
		plan     *restartPlanner
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
	evOwnerEnded[O comparable] struct{ owner O }
)

// The effects a failureRouter asks for.
type (
	effSupervise[O comparable] struct {
		owner O
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
	// stand-ins fail, for reason.
	effGiveUp struct {
		id     string
		ranks  []int
		reason string
	}
)

// step applies one event and returns the effects, in order.
func (r *failureRouter[O]) step(ev any) []any {
	var out []any
	switch ev := ev.(type) {
	case evOwned[O]:
		r.owned[ev.id] = &ownedMesh[O]{name: ev.name, base: ev.base, procs: ev.procs, owner: ev.owner, reported: map[int]bool{}, plan: ev.plan}
	case evDisowned:
		delete(r.owned, ev.id)
	case evMemberFailed:
		if ev.ownerProc != "" && ev.ownerProc != r.self {
			return append(out, effForward{ev.ownerProc, ev.f})
		}
		out = r.route(out, ev.f, ev.at, true)
	case evRestartDone:
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
		for _, f := range ev.failed {
			out = r.route(out, f, ev.at, true)
		}
		for _, f := range ev.final {
			out = r.route(out, f, ev.at, false)
		}
	case evMoved:
		if m := r.owned[ev.id]; m != nil {
			procs := slices.Clone(m.procs)
			for _, b := range ev.ranks {
				if b >= 0 && b < len(procs) {
					procs[b] = ev.proc
				}
			}
			m.procs = procs
		}
	case evProcEnded:
		if ev.n.Stopped {
			return nil
		}
		for _, id := range r.ownedIDs() {
			m := r.owned[id]
			if m.stopped {
				continue
			}
			var fs []*MeshFailure
			for b, p := range m.procs {
				if p != ev.n.Proc || m.reported[b] {
					continue
				}
				pt := m.base.point(b)
				fs = append(fs, &MeshFailure{
					Mesh: m.name, MeshID: id, ActorID: m.name + "[" + strconv.Itoa(b) + "]",
					Proc: p, Reason: "its proc ended: " + ev.n.Reason, Dims: m.base.dims, Coords: pt.coords, Base: b,
				})
			}
			out = r.routeAll(out, m, fs, ev.at)
		}
	case evMeshStopped:
		if m := r.owned[ev.id]; m != nil {
			m.stopped = true
		}
	case evOwnerEnded[O]:
		r.ended[ev.owner] = true
		for _, id := range r.ownedIDs() {
			m := r.owned[id]
			if m.owner == ev.owner && !m.stopped {
				m.stopped = true
				out = append(out, effStopMesh{id, uniq(m.procs)})
			}
		}
	default:
		panic(fmt.Sprintf("actorrt: failureRouter: unknown event %T", ev))
	}
	return out
}

// route passes a failure of a mesh on to whoever decides about it here:
// its restart policy, when it has one and the member may restart
// (restartable: not a failure for good), else its owner.
func (r *failureRouter[O]) route(out []any, f *MeshFailure, at time.Time, restartable bool) []any {
	m := r.owned[f.MeshID]
	if m == nil {
		return r.toOwner(out, nil, f) // an escalation from elsewhere
	}
	if m.reported[f.Base] || m.stopped {
		return out
	}
	if m.plan == nil || !restartable {
		m.reported[f.Base] = true
		return r.toOwner(out, m, f)
	}
	return r.routeAll(out, m, []*MeshFailure{f}, at)
}

// routeAll passes on members of m that failed together (one, or those on
// a proc that ended), not reported yet: one decision of m's restart
// policy for them all, or each to the owner.
func (r *failureRouter[O]) routeAll(out []any, m *ownedMesh[O], fs []*MeshFailure, at time.Time) []any {
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
			out = r.toOwner(out, m, f)
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
		out = append(out, effGiveUp{f.MeshID, []int{f.Base}, f.Reason + "; " + d.escalate})
		g := *f
		g.Reason += "; not restarted: " + d.escalate
		out = r.toOwner(out, m, &g)
	}
	return out
}

// toOwner passes f on to m's owner actor, if it still runs; else (owned
// by this process, by an actor that ended, or not owned here: an
// escalation) the root decides.
func (r *failureRouter[O]) toOwner(out []any, m *ownedMesh[O], f *MeshFailure) []any {
	var zero O
	if m != nil && m.owner != zero && !r.ended[m.owner] {
		return append(out, effSupervise[O]{m.owner, f})
	}
	if !r.client {
		return append(out, effEscalate{f})
	}
	return append(out, effUnhandled{f})
}

// restartable checks a restart by hand of ranks of mesh id: each failed
// and was reported, and is not being restarted by the policy. On
// success, the policy (if any) starts afresh: the owner took over.
func (r *failureRouter[O]) restartable(id string, ranks []int) error {
	m := r.owned[id]
	if m == nil || m.stopped {
		return fmt.Errorf("%w: the mesh is stopped, or not owned by proc %s (only its owner restarts it)", ErrStopped, r.self)
	}
	var live []string
	for _, b := range ranks {
		if !m.reported[b] || (m.plan != nil && m.plan.busy[b]) {
			live = append(live, m.name+"["+strconv.Itoa(b)+"]")
		}
	}
	if len(live) > 0 {
		return fmt.Errorf("%w: %s (running, or restarting by the mesh's policy)", ErrNotFailed, strings.Join(live, ", "))
	}
	if m.plan != nil {
		m.plan.manual()
	}
	return nil
}

// ownedIDs lists the owned meshes in a stable order, so that effects come
// out in one.
func (r *failureRouter[O]) ownedIDs() []string {
	ids := make([]string, 0, len(r.owned))
	for id := range r.owned {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
