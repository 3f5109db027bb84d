package actorrt

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/monarch-go/monarch/internal/jobview"
)

// What the runtime counts and tells for the job state feed. The client's
// model of the job, the control socket that serves it and the dashboard
// are internal/jobview's; here are the counts every process keeps and
// what a proc answers of itself:
//
//   - each meshRef counts the calls this process sends through it
//     (meshCounts: one atomic add a call, no lock, no allocation past the
//     first send); the client's are read into its snapshots (jobside.go);
//   - each member counts the messages it handled by endpoint, with their
//     handler times and errors (feedcount.go: one clock read a message,
//     stores its mailbox alone makes);
//   - a proc's inspector answers Figures with those counts, its CPU time
//     and memory (jobview.ReadSelf), its bus connection's counters and its
//     drops; the client asks only when the feed is read
//     (jobview.FiguresEvery), so nothing is sent while nobody looks;
//     MONARCH_FEED=off (feedOn) counts nothing.
//
// A failure handled by an owner actor in a proc never reaches the client:
// its member's proc says how the member is (jobview.MemberDown) when asked
// for its figures; no event tells of it.

// meshCounts counts the calls a process sent to one actor mesh, as its
// members get them: a call to the whole mesh is one add to whole, which
// every member got; a call to one member, or to a slice of several, one
// add to each member's count in the slice. A member's count is whole plus
// its own, and the mesh's the sum of its members' (jobview.Model). A
// meshRef finds its meshCounts once (sentTable.of) and keeps it.
type meshCounts struct {
	whole atomic.Uint64   // calls to the whole mesh
	one   []atomic.Uint64 // other calls, by base rank of a member they reached
}

// maxSentMeshes bounds the meshes a proc keeps counts of; the client's
// are those of the meshes its model keeps (forget).
const maxSentMeshes = 4096

// sentTable holds the meshCounts of the meshes this process called, by
// id: made at a mesh's first call.
type sentTable struct {
	// keepAll: this is the client, whose counts are read; a proc keeps
	// at most maxSentMeshes. Set before the runtime starts.
	keepAll bool

	mu     sync.Mutex
	meshes map[string]*meshCounts
}

// count counts a call sent through ref to the members of reg.
func (t *sentTable) count(ref *meshRef, reg *region) {
	mc := ref.counts.Load()
	if mc == nil {
		mc = t.of(ref)
	}
	if reg.isWhole() {
		mc.whole.Add(1)
		return
	}
	for v := range reg.numRanks() {
		if b := reg.baseRank(v); b >= 0 && b < len(mc.one) {
			mc.one[b].Add(1)
		}
	}
}

// of is the meshCounts of ref's mesh, made at its first use.
func (t *sentTable) of(ref *meshRef) *meshCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.meshes == nil {
		t.meshes = map[string]*meshCounts{}
	}
	mc := t.meshes[ref.id]
	if mc == nil {
		if len(t.meshes) >= maxSentMeshes && !t.keepAll {
			// Only the client's counts are read. A proc keeps a bounded
			// table: a reference keeps counting into the record it has,
			// which the table no longer holds.
			clear(t.meshes)
		}
		mc = &meshCounts{one: make([]atomic.Uint64, len(ref.procs))}
		t.meshes[ref.id] = mc
	}
	ref.counts.Store(mc)
	return mc
}

// forget drops the counts of mesh id, which the client's model forgot.
func (t *sentTable) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.meshes, id)
}

// to is what was sent to mesh id, as the model reads it; nil if nothing.
func (t *sentTable) to(id string) *jobview.Sent {
	t.mu.Lock()
	mc := t.meshes[id]
	t.mu.Unlock()
	if mc == nil {
		return nil
	}
	s := &jobview.Sent{Whole: mc.whole.Load(), One: make([]uint64, len(mc.one))}
	for i := range mc.one {
		s.One[i] = mc.one[i].Load()
	}
	return s
}

// downState is the member's state as its proc sees it when it does not
// run: "failed" with its failure's reason, "restarting" (a stand-in that
// waits for its owner's order) or "stopped"; "" while it runs.
func (a *actor) downState() (state, reason string) {
	if err := a.deadErr(); err != nil {
		if errors.Is(err, ErrStopped) {
			return "stopped", ""
		}
		reason = err.Error()
		var mf *MeshFailure
		if p := a.end.cause.Load(); p != nil && errors.As(*p, &mf) {
			reason = mf.Reason
		}
		return "failed", clip(reason, jobview.MaxDownReason)
	}
	if a.hold == nil {
		return "", ""
	}
	a.mesh.mu.Lock()
	waiting := !a.released
	a.mesh.mu.Unlock()
	if waiting {
		return "restarting", clip(a.standsFor, jobview.MaxDownReason)
	}
	return "", ""
}

// clip is s cut to at most n bytes.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Figures returns the proc's CPU time, memory and its actors' handled
// counts.
func (procInspector) Figures(ctx *Context) (jobview.Figures, error) {
	return ctx.actor.mesh.rt.actors.figures(), nil
}

// figures is this process's answer to Figures.
func (la *localActors) figures() jobview.Figures {
	var f jobview.Figures
	f.CPUTicks, f.RSS = jobview.ReadSelf(os.Getpid())
	if l := la.rt.link; l != nil {
		s := l.Stats()
		f.Bus = jobview.BusFigures{InMsgs: s.InMsgs, OutMsgs: s.OutMsgs, InBytes: s.InBytes, OutBytes: s.OutBytes}
		for k, n := range la.rt.dropCounts() {
			if n > 0 {
				if f.Dropped == nil {
					f.Dropped = map[string]uint64{}
				}
				f.Dropped[k] = n
			}
		}
	}
	la.mu.Lock()
	meshes := make([]*localMesh, 0, len(la.meshes))
	for _, lm := range la.meshes {
		if !isSystemMesh(lm.id) {
			meshes = append(meshes, lm)
		}
	}
	la.mu.Unlock()
	for _, lm := range meshes {
		mh := jobview.MeshHandled{Mesh: lm.id, Endpoints: lm.endpointFigures()}
		for _, a := range lm.current() {
			mh.Ranks = append(mh.Ranks, a.baseRank)
			mh.Counts = append(mh.Counts, handled(lm.stats[a.baseRank]))
			if st, why := a.downState(); st != "" {
				mh.Down = append(mh.Down, jobview.MemberDown{Rank: a.baseRank, State: st, Reason: why})
			}
		}
		f.Handled = append(f.Handled, mh)
	}
	return f
}
