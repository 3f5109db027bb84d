package actorrt

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/monarch-go/monarch/internal/delivery"
	"github.com/monarch-go/monarch/internal/wire"
)

// Members that moved. A member of a mesh with a restart policy whose proc
// ended is restarted on a new proc, started in its old one's place by the
// same host agent (same rank, environment, wrapper and CPU binding). The
// new proc does not join the mesh's subject (a receiver that joined a
// sequenced subject midway could not tell what it missed): it is reached
// on its own subject, where every sender's numbering starts with it. A
// reference records the members that moved (memberMoves) beside where
// the mesh was spawned; a holder that finds a member's proc gone asks the
// mesh's owner where the member is now (refreshMoves), and the owner
// answers once its restart is decided.

// memberMoves is where moved members of a mesh live now: their proc and
// agent by base rank, and those procs once each. Never modified: replaced
// whole.
type memberMoves struct {
	procs, agents map[int]string
	hosts         []string
}

// movedWire is a moved member as references and the owner's answers
// carry it.
type movedWire struct {
	Rank  int    `msgpack:"rank"`
	Proc  string `msgpack:"proc"`
	Agent string `msgpack:"agent"`
}

func movesOf(ws []movedWire) *memberMoves {
	if len(ws) == 0 {
		return nil
	}
	mv := &memberMoves{procs: map[int]string{}, agents: map[int]string{}}
	for _, w := range ws {
		mv.procs[w.Rank], mv.agents[w.Rank] = w.Proc, w.Agent
		if !slices.Contains(mv.hosts, w.Proc) {
			mv.hosts = append(mv.hosts, w.Proc)
		}
	}
	return mv
}

func (mv *memberMoves) wire() []movedWire {
	if mv == nil {
		return nil
	}
	out := make([]movedWire, 0, len(mv.procs))
	for b, p := range mv.procs {
		out = append(out, movedWire{Rank: b, Proc: p, Agent: mv.agents[b]})
	}
	slices.SortFunc(out, func(a, b movedWire) int { return a.Rank - b.Rank })
	return out
}

// with is mv with ranks moved to proc (of agent).
func (mv *memberMoves) with(ranks []int, proc, agent string) *memberMoves {
	var ws []movedWire
	if mv != nil {
		for _, w := range mv.wire() {
			if !slices.Contains(ranks, w.Rank) {
				ws = append(ws, w)
			}
		}
	}
	for _, b := range ranks {
		ws = append(ws, movedWire{Rank: b, Proc: proc, Agent: agent})
	}
	return movesOf(ws)
}

// procOf is the proc of base rank b now.
func (r *meshRef) procOf(b int) string {
	if mv := r.moves.Load(); mv != nil {
		if p, ok := mv.procs[b]; ok {
			return p
		}
	}
	return r.procs[b]
}

// agentOf is the host agent of base rank b's proc now.
func (r *meshRef) agentOf(b int) string {
	if mv := r.moves.Load(); mv != nil {
		if a, ok := mv.agents[b]; ok {
			return a
		}
	}
	return r.agents[b]
}

// allProcs is every proc the mesh has or had members on: its spawn's and
// the moved members'.
func (r *meshRef) allProcs() []string {
	mv := r.moves.Load()
	if mv == nil {
		return r.all
	}
	return uniq(append(slices.Clone(r.all), mv.hosts...))
}

// procsOfMoved is procsOf for a mesh with moved members.
func (r *meshRef) procsOfMoved(reg region) []string {
	var out []string
	for _, b := range reg.baseRanks() {
		if p := r.procOf(b); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// deliverMoved is deliverTo for a mesh with moved members: the whole
// mesh on its subject and the moved members' procs on theirs; a slice on
// the subject of each of its procs.
func (rt *core) deliverMoved(ref *meshRef, reg region, mv *memberMoves, w *wire.Writer, h *wire.Header) error {
	var dests []delivery.Dest
	if reg.isWhole() {
		dests = append(dests, ref.dest(rt.subjects))
		for _, p := range mv.hosts {
			dests = append(dests, rt.delivery.ToProc(p))
		}
	} else {
		for _, p := range ref.sendProcs(reg) {
			dests = append(dests, rt.delivery.ToProc(p))
		}
	}
	if len(dests) == 1 {
		return rt.delivery.Send(w, h, dests[0])
	}
	return rt.delivery.SendAll(w, h, dests)
}

// refreshDue reports whether a member of reg of ref, not missing, is on
// a proc that ended, in a mesh whose owner may have restarted it elsewhere.
func (ref *meshRef) refreshDue(reg region) bool {
	h := ref.rt.health
	return ref.restartable && ref.owner != "" && h.nGone.Load() != 0 && h.anyGone(ref.sendProcs(reg)) != nil
}

// refreshMoves asks the owner of a mesh with a restart policy where its
// members are now, when one of reg's is on a proc that ended: the owner
// answers once it restarted it elsewhere, or gave up. It waits at most the
// spawn timeout, or until ctx ends; on any failure the reference stays as
// it was (and the send fails on the gone proc, as it would have).
func (rt *core) refreshMoves(ctx context.Context, ref *meshRef, reg region) {
	if !ref.refreshDue(reg) {
		return
	}
	if ref.owner == rt.procID {
		rt.sup.awaitSettled(ctx, ref)
		if own := rt.sup.ref(ref.id); own != nil && own != ref {
			ref.missing.Store(own.missing.Load()) // a second reference here: the owner's knows
		}
		return
	}
	fut := newFuture[meshInfo](label{mesh: ref.name, method: "where are the members now"})
	id, err := rt.ports.open(&onePort[meshInfo]{fut: fut}, []string{ref.owner})
	if err != nil {
		return
	}
	defer rt.ports.close(id)
	if err := rt.sendControl(ref.owner, wire.OpMeshInfo, id, &meshInfoReq{Mesh: ref.id, Settled: true}); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, rt.opts.spawnTimeout)
	defer cancel()
	info, err := fut.Get(ctx)
	if err != nil || len(info.Procs) != len(ref.procs) || !slices.Equal(info.Procs, ref.procs) {
		return
	}
	if checkMoved(info.Moved, len(ref.procs)) != nil || checkMissing(info.Missing, len(ref.procs)) != nil {
		return
	}
	ref.setMissing(info.Missing)
	mv := movesOf(info.Moved)
	ref.moves.Store(mv)
	if mv != nil {
		infos := make([]procInfo, 0, len(mv.hosts))
		for b, p := range mv.procs {
			infos = append(infos, procInfo{ID: p, Agent: mv.agents[b]})
		}
		rt.health.started(infos, false)
	}
}

// settleWait is how often an owner looks again whether a restart it is
// asked about was decided, besides at each step of its supervision (a
// proc's end is known to health a moment before supervision hears of it).
const settleWait = 10 * time.Millisecond

// awaitSettled returns once no member of ref is on a proc that ended
// while its restart is pending (decided, under way, or not yet decided
// because the end was just heard of), at most the spawn timeout or until
// ctx ends.
func (s *supervision) awaitSettled(ctx context.Context, ref *meshRef) {
	ctx, cancel := context.WithTimeout(ctx, s.rt.opts.spawnTimeout)
	defer cancel()
	t := time.NewTimer(settleWait)
	defer t.Stop()
	for {
		ok, stepped := s.settled(ref)
		if ok {
			return
		}
		t.Reset(settleWait)
		select {
		case <-ctx.Done():
			return
		case <-stepped:
		case <-t.C:
		}
	}
}

// settled: every member of ref whose proc ended was decided about (its
// failure reported) and is not waiting for, or in, a restart. If not,
// stepped is closed at the next step.
func (s *supervision) settled(ref *meshRef) (ok bool, stepped <-chan struct{}) {
	if ref.stopped.Load() {
		return true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stepped == nil {
		s.stepped = make(chan struct{})
	}
	stepped = s.stepped
	m := s.router.owned[ref.id]
	if m == nil || m.stopped {
		return true, nil
	}
	for b := range ref.procs {
		if s.rt.health.goneErr(ref.procOf(b)) == nil {
			continue
		}
		if !m.reported[b] || (m.plan != nil && m.plan.busy[b]) {
			return false, stepped
		}
	}
	return true, nil
}

// meshInfoOf is where the members of mesh id, owned here, are: by base
// rank as spawned, and those that moved.
func (s *supervision) meshInfoOf(ref *meshRef) *meshInfo {
	return &meshInfo{Procs: ref.procs, Agents: ref.agents, Moved: ref.moves.Load().wire(), Missing: ref.missingWire()}
}

// spawnMoved spawns ranks of ref, whose proc ended, on the new proc p:
// members reached on p's own subject (spawnReq.Moved), then the moved
// members are recorded in ref and in the router. Each rank's answer (its
// Init) comes as a restart's does.
func (rt *core) spawnMoved(ctx context.Context, ref *meshRef, ranks []int, p procInfo) (map[int]error, error) {
	if ref.spawned == nil {
		return nil, fmt.Errorf("mesh %s was not spawned here", ref.name)
	}
	rp := newRestartPort(ranks)
	port, err := rt.ports.open(rp, []string{p.ID})
	if err != nil {
		return nil, err
	}
	defer rt.ports.close(port)
	req := *ref.spawned
	req.Ranks, req.Moved = ranks, true
	if err := rt.sendControl(p.ID, wire.OpSpawn, port, &req); err != nil {
		return nil, err
	}
	errs, whole := rp.wait(ctx, rt.opts.spawnTimeout, "spawn of "+ref.name+" on its new proc "+p.ID)
	if whole != nil {
		return nil, whole
	}
	ref.moves.Store(ref.moves.Load().with(ranks, p.ID, p.Agent))
	rt.sup.step(evMoved{id: ref.id, ranks: ranks, proc: p.ID})
	return errs, nil
}

// Members missing. A mesh spawned with GoOnWithout goes on without a
// member that cannot be restarted: its owner marks it missing in its
// reference (supervision.step), and the adverbs sent through that
// reference skip it; a reference elsewhere learns it from the member's
// answers, which fail with ErrMissing (callPort, streamPort), or, when
// the member's proc ended, from the owner's answer to refreshMoves, which
// then tells the reply ports of the calls queued meanwhile
// (missingSkipper).

// missingMarks are the missing members of a mesh, by base rank, with why.
// Never modified: replaced whole.
type missingMarks map[int]string

// markMissing records ranks as missing, for why.
func (r *meshRef) markMissing(ranks []int, why string) {
	r.remark(func(m missingMarks) {
		for _, b := range ranks {
			m[b] = why
		}
	})
}

// markPresent records that ranks are back (restarted by hand).
func (r *meshRef) markPresent(ranks []int) {
	if r.missing.Load() == nil {
		return
	}
	r.remark(func(m missingMarks) {
		for _, b := range ranks {
			delete(m, b)
		}
	})
}

// remark replaces the marks with a copy that change changed.
func (r *meshRef) remark(change func(missingMarks)) {
	for {
		old := r.missing.Load()
		next := missingMarks{}
		if old != nil {
			maps.Copy(next, *old)
		}
		change(next)
		p := &next
		if len(next) == 0 {
			p = nil
		}
		if r.missing.CompareAndSwap(old, p) {
			return
		}
	}
}

// missingIn lists the missing members of reg by their rank in it, with
// why, in rank order; nil when none (the common case: one atomic load).
func (r *meshRef) missingIn(reg region) []missingMember {
	mp := r.missing.Load()
	if mp == nil {
		return nil
	}
	var out []missingMember
	for b, why := range *mp {
		if v, ok := reg.messageRank(b); ok {
			out = append(out, missingMember{rank: v, base: b, why: why})
		}
	}
	slices.SortFunc(out, func(a, b missingMember) int { return a.rank - b.rank })
	return out
}

// missingWire is a missing member as the owner's answers carry it.
type missingWire struct {
	Rank int    `msgpack:"rank"`
	Why  string `msgpack:"why"`
}

// missingWire lists the marks, by rank; nil when none.
func (r *meshRef) missingWire() []missingWire {
	mp := r.missing.Load()
	if mp == nil {
		return nil
	}
	out := make([]missingWire, 0, len(*mp))
	for b, why := range *mp {
		out = append(out, missingWire{Rank: b, Why: why})
	}
	slices.SortFunc(out, func(a, b missingWire) int { return a.Rank - b.Rank })
	return out
}

// setMissing replaces the marks with ws, the owner's.
func (r *meshRef) setMissing(ws []missingWire) {
	if len(ws) == 0 {
		r.missing.Store(nil)
		return
	}
	m := make(missingMarks, len(ws))
	for _, w := range ws {
		m[w.Rank] = w.Why
	}
	r.missing.Store(&m)
}

// checkMissing checks the missing members of an answer about a mesh of n
// members: each a rank of it.
func checkMissing(ws []missingWire, n int) error {
	for _, w := range ws {
		if w.Rank < 0 || w.Rank >= n {
			return fmt.Errorf("%w: mesh info: missing member %d of %d", ErrDecode, w.Rank, n)
		}
	}
	return nil
}

// missingSkipper is a reply port that can be told, before its call is
// sent, of members its sender learned are missing since it was opened
// (sendQueue, once a refresh told it): it reports whether none is left to
// answer.
type missingSkipper interface {
	skipMissing(missing []missingMember) (done bool)
}

// missingMember is a missing member of a region: its rank there, its
// base rank, and why it is missing.
type missingMember struct {
	rank, base int
	why        string
}

// missingErr is the error of a call to missing member mm of ref.
func (r *meshRef) missingErr(mm missingMember) error {
	return fmt.Errorf("%w: %s[%d]: %s", ErrMissing, r.name, mm.base, mm.why)
}

// sendProcs is the procs a call to reg goes to and waits for: procsOf,
// without the procs of missing members alone.
func (r *meshRef) sendProcs(reg region) []string {
	return r.presentProcs(reg, r.missingIn(reg))
}

// presentProcs is procsOf(reg) without the procs all of whose members in
// reg are missing: no call waits for them, or is sent to them.
func (r *meshRef) presentProcs(reg region, missing []missingMember) []string {
	procs := r.procsOf(reg)
	if len(missing) == 0 {
		return procs
	}
	present := map[string]bool{}
	gone := map[int]bool{}
	for _, mm := range missing {
		gone[mm.base] = true
	}
	for _, b := range reg.baseRanks() {
		if !gone[b] {
			present[r.procOf(b)] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(procs), func(p string) bool { return !present[p] })
}
