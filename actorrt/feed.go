package actorrt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/procstat"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
)

// The job state feed (jobctl.OpState, jobctl.OpWatch): the client keeps a
// live model of the job from what already reaches it, and builds a
// snapshot (jobctl.JobState) when asked. What comes from where:
//
//   - hosts: the agents' heartbeats (watchAgent) and the health table's
//     word on their end;
//   - proc meshes: those the client started (client.spawned), each proc's
//     end from the health table;
//   - actor meshes: every mesh registered with the client's name registry
//     (every Spawn registers), kept after its stop; a member's state from
//     the supervision events the client sees (a failure of a mesh it owns
//     or one escalated to it, a restart by its policy) and its proc's end;
//   - counts: each meshRef counts the calls this process sends through it
//     (meshCounts: one atomic add a call, no lock, no allocation past the
//     first send); each member counts the messages it handled by
//     endpoint, with their handler times and errors (feedcount.go: one
//     clock read a message, stores its mailbox alone makes); the client
//     asks the procs' inspectors for theirs (Figures) only when the feed
//     is read, at most every figuresEvery, so nothing is sent while
//     nobody looks; MONARCH_FEED=off (feedOn) counts nothing;
//   - CPU, memory, bus traffic and drops: each proc reads its own
//     /proc/self/stat and its bus connection's counters in the same
//     answer; the client its own, as proc "c" (jobctl.JobState.Client);
//   - supervision events: a ring of the last jobctl.MaxEvents, and their
//     totals by kind;
//   - log lines: the client's log receiver keeps the last
//     jobctl.MaxLogLines (clientLogs.recent).
//
// A failure handled by an owner actor in a proc never reaches the client:
// its member's proc says how the member is (memberDown) when asked for
// its figures; no event tells of it.

// figuresEvery is the least time between two rounds of asking the procs
// for their figures.
const figuresEvery = 500 * time.Millisecond

// maxFeedStopped bounds the stopped actor meshes the feed remembers: past
// it the oldest are forgotten.
const maxFeedStopped = 1024

// meshCounts counts the calls a process sent to one actor mesh. A meshRef
// finds its meshCounts once (core.sentCounts) and keeps it.
// Each call is one atomic add: every call is the sum of the three.
type meshCounts struct {
	whole atomic.Uint64   // calls to the whole mesh
	part  atomic.Uint64   // calls to a slice of several members
	one   []atomic.Uint64 // calls to one member, by base rank
}

// countSent counts a call sent through ref to the members of reg.
func (rt *core) countSent(ref *meshRef, reg region) {
	mc := ref.counts.Load()
	if mc == nil {
		mc = rt.sentCounts(ref)
	}
	if reg.isWhole() {
		mc.whole.Add(1)
		return
	}
	if reg.numRanks() == 1 {
		if b := reg.baseRank(0); b >= 0 && b < len(mc.one) {
			mc.one[b].Add(1)
			return
		}
	}
	mc.part.Add(1)
}

// all is every call counted.
func (mc *meshCounts) all() uint64 {
	n := mc.whole.Load() + mc.part.Load()
	for i := range mc.one {
		n += mc.one[i].Load()
	}
	return n
}

// sentCounts is the meshCounts of ref's mesh in this process, made at its
// first use.
func (rt *core) sentCounts(ref *meshRef) *meshCounts {
	rt.sentMu.Lock()
	defer rt.sentMu.Unlock()
	if rt.sent == nil {
		rt.sent = map[string]*meshCounts{}
	}
	mc := rt.sent[ref.id]
	if mc == nil {
		if len(rt.sent) >= maxSentMeshes && rt.client() == nil {
			// Only the client's counts are read (the feed). A proc keeps
			// a bounded table: a reference keeps counting into the record
			// it has, which the table no longer holds.
			clear(rt.sent)
		}
		mc = &meshCounts{one: make([]atomic.Uint64, len(ref.procs))}
		rt.sent[ref.id] = mc
	}
	ref.counts.Store(mc)
	return mc
}

// maxSentMeshes bounds the meshes a proc keeps counts of; the client's
// are those of the meshes its feed keeps (forgetSent).
const maxSentMeshes = 4096

// forgetSent drops the counts of mesh id, which the feed forgot.
func (rt *core) forgetSent(id string) {
	rt.sentMu.Lock()
	defer rt.sentMu.Unlock()
	delete(rt.sent, id)
}

// sentTo is this process's counts of mesh id, or nil.
func (rt *core) sentTo(id string) *meshCounts {
	rt.sentMu.Lock()
	defer rt.sentMu.Unlock()
	return rt.sent[id]
}

// procFigures is an inspector's answer to Figures.
type procFigures struct {
	CPUTicks int64         `msgpack:"cpu"` // USER_HZ ticks
	RSS      int64         `msgpack:"rss"` // bytes
	Handled  []meshHandled `msgpack:"handled"`
	// Bus is the proc's bus connection's traffic; Dropped its drop
	// counts that are not zero, by kind (node.dropCounts).
	Bus     busFigures        `msgpack:"bus"`
	Dropped map[string]uint64 `msgpack:"dropped,omitempty"`
}

// busFigures is bus.Stats on the wire.
type busFigures struct {
	InMsgs   uint64 `msgpack:"in_msgs"`
	OutMsgs  uint64 `msgpack:"out_msgs"`
	InBytes  uint64 `msgpack:"in_bytes"`
	OutBytes uint64 `msgpack:"out_bytes"`
}

// meshHandled is what the members of one mesh on a proc handled: each
// member's count, the endpoints' figures summed over them, and the
// members that do not run.
type meshHandled struct {
	Mesh      string            `msgpack:"mesh"`
	Ranks     []int             `msgpack:"ranks"` // base ranks
	Counts    []uint64          `msgpack:"counts"`
	Endpoints []endpointFigures `msgpack:"endpoints,omitempty"`
	Down      []memberDown      `msgpack:"down,omitempty"` // members not running
}

// memberDown is a member that does not run, as its proc sees it: its
// owner may be an actor in another proc, whose supervision the client
// does not see.
type memberDown struct {
	Rank   int    `msgpack:"rank"` // base rank
	State  string `msgpack:"state"`
	Reason string `msgpack:"reason"`
}

// maxDownReason bounds the reason a proc tells of a member.
const maxDownReason = 1024

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
		return "failed", clip(reason, maxDownReason)
	}
	if a.hold == nil {
		return "", ""
	}
	a.mesh.mu.Lock()
	waiting := !a.released
	a.mesh.mu.Unlock()
	if waiting {
		return "restarting", clip(a.standsFor, maxDownReason)
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
func (procInspector) Figures(ctx *Context) (procFigures, error) {
	return ctx.actor.mesh.rt.actors.figures(), nil
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

// figures is this process's procFigures.
func (la *localActors) figures() procFigures {
	var f procFigures
	if st, err := procstat.Read(os.Getpid()); err == nil {
		f.CPUTicks, f.RSS = st.CPUTicks, st.RSS
	}
	if l := la.rt.link; l != nil {
		s := l.Stats()
		f.Bus = busFigures{InMsgs: s.InMsgs, OutMsgs: s.OutMsgs, InBytes: s.InBytes, OutBytes: s.OutBytes}
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
		mh := meshHandled{Mesh: lm.id, Endpoints: lm.endpointFigures()}
		for _, a := range lm.current() {
			mh.Ranks = append(mh.Ranks, a.baseRank)
			mh.Counts = append(mh.Counts, handled(lm.stats[a.baseRank]))
			if st, why := a.downState(); st != "" {
				mh.Down = append(mh.Down, memberDown{Rank: a.baseRank, State: st, Reason: why})
			}
		}
		f.Handled = append(f.Handled, mh)
	}
	return f
}

// jobFeed is the client's model of the job. Safe for concurrent use.
type jobFeed struct {
	c *client

	mu        sync.Mutex
	seq       uint64
	hosts     map[string]*jobctl.HostState // by agent
	hostOrder []string
	meshes    map[string]*feedMesh // by id
	meshOrder []string
	nStopped  int
	events    [jobctl.MaxEvents]jobctl.Event // a ring
	nEvents   uint64                         // events ever
	totals    jobctl.Totals                  // events ever, by kind
	figures   map[string]procSaid            // by proc: what it said last

	asking  sync.Mutex // one round of asking at a time
	askedAt time.Time  // under asking
}

// feedMesh is an actor mesh the feed knows.
type feedMesh struct {
	w       actorMeshWire
	ext     Extent
	stopped bool
	marks   map[int]memberMark // members not running, by base rank
	moved   map[int]string     // members restarted on a new proc: its id
}

// memberMark is a member's state other than running.
type memberMark struct {
	state, reason string
}

// memberAt is a member (by base rank) on a proc: what a proc says of a
// member that moved counts only while the member is there.
type memberAt struct {
	rank int
	proc string
}

// procSaid is a proc's figures and when it gave them.
type procSaid struct {
	procFigures
	at time.Time
}

func newJobFeed(c *client) *jobFeed {
	return &jobFeed{c: c, hosts: map[string]*jobctl.HostState{}, meshes: map[string]*feedMesh{}, figures: map[string]procSaid{}}
}

// heard takes a heartbeat of agent.
func (f *jobFeed) heard(agent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hostLocked(agent)
	h.LastHeartbeat = time.Now()
}

// hostLocked is agent's HostState, added if new. Hold f.mu.
func (f *jobFeed) hostLocked(agent string) *jobctl.HostState {
	h := f.hosts[agent]
	if h == nil {
		h = &jobctl.HostState{Agent: agent, State: "up"}
		f.hosts[agent] = h
		f.hostOrder = append(f.hostOrder, agent)
		f.seq++
	}
	return h
}

// meshAdded takes a mesh registered with the client.
func (f *jobFeed) meshAdded(w actorMeshWire) {
	reg, err := w.Region.region(len(w.Procs))
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.meshes[w.ID] != nil {
		return
	}
	f.meshes[w.ID] = &feedMesh{w: w, ext: reg.extent(), marks: map[int]memberMark{}}
	f.meshOrder = append(f.meshOrder, w.ID)
	f.seq++
}

// meshStopped takes the stop of mesh id; past maxFeedStopped stopped
// meshes the oldest is forgotten.
func (f *jobFeed) meshStopped(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.meshes[id]
	if m == nil || m.stopped {
		return
	}
	m.stopped = true
	f.seq++
	if f.nStopped++; f.nStopped <= maxFeedStopped {
		return
	}
	for i, old := range f.meshOrder {
		if f.meshes[old].stopped {
			delete(f.meshes, old)
			f.c.forgetSent(old)
			f.meshOrder = slices.Delete(f.meshOrder, i, i+1)
			f.nStopped--
			return
		}
	}
}

// supervised takes what the client's supervision saw: one event and the
// effects the router asked for.
func (f *jobFeed) supervised(ev routerEvent, effects []routerEffect) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch ev := ev.(type) {
	case evMemberFailed:
		f.failedLocked(now, "failure", ev.f)
	case evProcEnded:
		reason := ev.n.Reason
		if ev.n.Stopped {
			reason = "stopped"
		}
		f.eventLocked(jobctl.Event{At: now, Kind: "proc_ended", Rank: -1, Proc: ev.n.Proc, Reason: reason})
	case evMoved:
		if m := f.meshes[ev.id]; m != nil {
			if m.moved == nil {
				m.moved = map[int]string{}
			}
			for _, b := range ev.ranks {
				if b >= 0 && b < len(m.w.Procs) {
					m.moved[b] = ev.proc
				}
			}
			f.seq++
		}
	case evRestartDone:
		if m := f.meshes[ev.id]; m != nil {
			for _, b := range ev.ranks {
				if m.marks[b].state == "restarting" {
					delete(m.marks, b)
				}
			}
		}
		for _, g := range ev.failed {
			f.markLocked(g.MeshID, g.Base, "failed", g.Reason)
		}
		for _, g := range ev.final {
			f.markLocked(g.MeshID, g.Base, "failed", g.Reason)
		}
		f.seq++
	}
	for _, e := range effects {
		switch e := e.(type) {
		case effUnhandled:
			f.markLocked(e.f.MeshID, e.f.Base, "failed", e.f.Reason)
			f.eventLocked(jobctl.Event{At: now, Kind: "unhandled", Mesh: e.f.Mesh, Rank: e.f.Base, Proc: e.f.Proc, Reason: e.f.Reason})
		case effSupervise:
			f.markLocked(e.f.MeshID, e.f.Base, "failed", e.f.Reason)
		case effRestart:
			name := e.id
			if m := f.meshes[e.id]; m != nil {
				name = m.w.Name
			}
			for _, b := range e.ranks {
				f.markLocked(e.id, b, "restarting", e.f.Reason)
			}
			f.eventLocked(jobctl.Event{At: now, Kind: "restart", Mesh: name, Rank: -1, Ranks: e.ranks, Reason: e.f.ActorID + " failed: " + e.f.Reason})
		case effGiveUp:
			name := e.id
			if m := f.meshes[e.id]; m != nil {
				name = m.w.Name
			}
			for _, b := range e.ranks {
				f.markLocked(e.id, b, "failed", e.reason)
			}
			f.eventLocked(jobctl.Event{At: now, Kind: "gave_up", Mesh: name, Rank: -1, Ranks: e.ranks, Reason: e.reason})
		}
	}
}

func (f *jobFeed) failedLocked(now time.Time, kind string, mf *MeshFailure) {
	if f.meshes[mf.MeshID] == nil || f.meshes[mf.MeshID].marks[mf.Base].state != "restarting" {
		f.markLocked(mf.MeshID, mf.Base, "failed", mf.Reason)
	}
	f.eventLocked(jobctl.Event{At: now, Kind: kind, Mesh: mf.Mesh, Rank: mf.Base, Proc: mf.Proc, Reason: mf.Reason})
}

func (f *jobFeed) markLocked(id string, b int, state, reason string) {
	m := f.meshes[id]
	if m == nil || b < 0 || b >= len(m.w.Procs) {
		return
	}
	if state == "failed" && m.marks[b].state == "restarting" {
		return // the restart's end says how it went
	}
	m.marks[b] = memberMark{state: state, reason: reason}
	f.seq++
}

func (f *jobFeed) eventLocked(e jobctl.Event) {
	t := &f.totals
	switch e.Kind {
	case "failure":
		t.Failures++
	case "restart":
		t.Restarts += uint64(len(e.Ranks))
	case "gave_up":
		t.GaveUp += uint64(len(e.Ranks))
	case "unhandled":
		t.Unhandled++
	case "proc_ended":
		t.ProcsEnded++
		if e.Reason != "stopped" {
			t.ProcsFailed++
		}
	}
	f.events[f.nEvents%jobctl.MaxEvents] = e
	f.nEvents++
	f.seq++
}

// refresh asks the procs for their figures, unless that was done less
// than figuresEvery ago, waiting at most timeout; a proc that does not
// answer keeps what it said last.
func (f *jobFeed) refresh(ctx context.Context, timeout time.Duration) {
	f.asking.Lock()
	defer f.asking.Unlock()
	if time.Since(f.askedAt) < figuresEvery {
		return
	}
	c := f.c
	procs := c.ctlProcs()
	infos := make([]jobctl.ProcInfo, len(procs))
	said := make([]procSaid, len(procs))
	c.askEach(ctx, procs, infos, timeout, "figures", "late", func(ctx context.Context, i int, p ctlProc) error {
		fig, err := askInspector[procFigures](ctx, c.core, p.info.ID, "Figures")
		if err == nil {
			said[i] = procSaid{fig, time.Now()}
		}
		return err
	})
	own := procSaid{c.actors.figures(), time.Now()} // the client's, as a proc's
	f.askedAt = time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	next := make(map[string]procSaid, len(procs)+1) // only the procs there are: bounded
	next[jobenv.ClientID] = own
	for i, p := range procs {
		if !said[i].at.IsZero() {
			next[p.info.ID] = said[i]
		} else if old, ok := f.figures[p.info.ID]; ok {
			next[p.info.ID] = old
		}
	}
	f.figures = next
}

// snapshot is the job's state now (after refresh, for fresh figures).
func (f *jobFeed) snapshot() *jobctl.JobState {
	c := f.c
	s := &jobctl.JobState{Version: jobctl.StateVersion, Job: c.job, At: time.Now()}
	c.spawnedMu.Lock()
	pms := slices.Clone(c.spawned)
	c.spawnedMu.Unlock()

	f.mu.Lock()
	defer f.mu.Unlock()
	// Hosts: the agents heard, and those of the procs started.
	hostNames := map[string]string{}
	for _, pm := range pms {
		for _, p := range pm.procs {
			if p.Agent != "" {
				f.hostLocked(p.Agent)
				if hostNames[p.Agent] == "" {
					hostNames[p.Agent] = p.Host
				}
			}
		}
	}
	s.Seq = f.seq
	for _, a := range f.hostOrder {
		h := *f.hosts[a]
		if h.Name == "" {
			h.Name = hostNames[a]
		}
		if n, gone := c.health.notice(a); gone {
			h.State, h.Reason = "gone", n.Reason
		}
		s.Hosts = append(s.Hosts, h)
	}
	// Handled counts, by mesh and base rank; endpoint figures, by mesh,
	// summed over the procs; members not running, as their procs said.
	handled := map[string]map[int]uint64{}
	endpoints := map[string]map[string]*jobctl.EndpointState{}
	down := map[string]map[memberAt]memberMark{}
	for proc, said := range f.figures {
		for _, mh := range said.Handled {
			for _, d := range mh.Down {
				if down[mh.Mesh] == nil {
					down[mh.Mesh] = map[memberAt]memberMark{}
				}
				down[mh.Mesh][memberAt{d.Rank, proc}] = memberMark{state: d.State, reason: d.Reason}
			}
			if handled[mh.Mesh] == nil {
				handled[mh.Mesh] = map[int]uint64{}
			}
			for i, b := range mh.Ranks {
				if i < len(mh.Counts) {
					handled[mh.Mesh][b] += mh.Counts[i] // a moved member's procs, each its part
				}
			}
			if len(mh.Endpoints) > 0 && endpoints[mh.Mesh] == nil {
				endpoints[mh.Mesh] = map[string]*jobctl.EndpointState{}
			}
			for _, ef := range mh.Endpoints {
				addEndpoint(endpoints[mh.Mesh], ef)
			}
		}
	}
	s.Counting = feedOn
	s.Totals = f.totals
	s.Client = jobctl.ProcState{Proc: jobenv.ClientID, Host: c.hostLabel, PID: os.Getpid(), State: "running"}
	if said, ok := f.figures[jobenv.ClientID]; ok {
		said.into(&s.Client)
	}
	// A proc started in the place of one that ended shows at its rank.
	successor := map[string]procInfo{}
	for _, pm := range pms {
		if pm.replaces != "" && len(pm.procs) == 1 {
			successor[pm.replaces] = pm.procs[0]
		}
	}
	for _, pm := range pms {
		if pm.replaces != "" {
			continue
		}
		ps := jobctl.ProcMeshState{Name: pm.name, Extent: extentOf(pm.Extent()), Command: pm.command}
		for r, p := range pm.procs {
			n := 0
			for next, ok := successor[p.ID]; ok && n < len(successor); next, ok = successor[p.ID] {
				p = next
				n++
			}
			st := jobctl.ProcState{Proc: p.ID, Rank: r, Host: p.Host, PID: p.PID, State: "running", Respawns: n}
			if h := c.counts.hostOf(p.ID); h != "" {
				st.Host = h
			}
			if n, gone := c.health.notice(p.ID); gone {
				st.State, st.Reason = procEndState(n)
			}
			if said, ok := f.figures[p.ID]; ok {
				said.into(&st)
			}
			ps.Procs = append(ps.Procs, st)
		}
		s.ProcMeshes = append(s.ProcMeshes, ps)
	}
	for _, id := range f.meshOrder {
		m := f.meshes[id]
		ms := jobctl.ActorMeshState{ID: id, Name: m.w.Name, Type: shortName(m.w.Type), Extent: extentOf(m.ext),
			Owner: m.w.Owner, Stopped: m.stopped}
		if ms.Owner == "" {
			ms.Owner = ownerOf(id)
		}
		mc := c.sentTo(id)
		var whole uint64
		if mc != nil {
			ms.Sent, whole = mc.all(), mc.whole.Load()
		}
		for b, p := range m.w.Procs {
			if moved, ok := m.moved[b]; ok {
				p = moved
			}
			mem := jobctl.MemberState{Rank: b, Proc: p, State: "running", Handled: handled[id][b], Sent: whole}
			if mc != nil && b < len(mc.one) {
				mem.Sent += mc.one[b].Load()
			}
			ms.Handled += mem.Handled
			switch mark, marked := m.marks[b]; {
			case m.stopped:
				mem.State = "stopped"
			case marked:
				mem.State, mem.Reason = mark.state, mark.reason
			case down[id][memberAt{b, p}].state != "":
				// Its owner is an actor elsewhere: its proc says.
				d := down[id][memberAt{b, p}]
				mem.State, mem.Reason = d.state, d.reason
			default:
				if n, gone := c.health.notice(p); gone {
					mem.State, mem.Reason = procEndState(n)
				}
			}
			ms.Members = append(ms.Members, mem)
		}
		for _, name := range slices.Sorted(maps.Keys(endpoints[id])) {
			ms.Endpoints = append(ms.Endpoints, *endpoints[id][name])
		}
		s.ActorMeshes = append(s.ActorMeshes, ms)
	}
	n := min(f.nEvents, jobctl.MaxEvents)
	s.EventsDropped = f.nEvents - n
	for i := f.nEvents - n; i < f.nEvents; i++ {
		s.Events = append(s.Events, f.events[i%jobctl.MaxEvents])
	}
	s.Logs, s.LogLines = c.logs.recentLines()
	return s
}

// into sets a proc's figures in st.
func (said procSaid) into(st *jobctl.ProcState) {
	st.CPUSeconds = float64(said.CPUTicks) / clockTicks
	st.RSS, st.FiguresAt = said.RSS, said.at
	b := said.Bus
	st.Bus = &jobctl.BusState{InMsgs: b.InMsgs, OutMsgs: b.OutMsgs, InBytes: b.InBytes, OutBytes: b.OutBytes}
	st.Dropped = maps.Clone(said.Dropped)
}

// addEndpoint adds a proc's figures of an endpoint to those of its mesh,
// by name. A figure with more buckets than there are (a proc of another
// build) has its extra ones counted in the last.
func addEndpoint(into map[string]*jobctl.EndpointState, ef endpointFigures) {
	es := into[ef.Name]
	if es == nil {
		es = &jobctl.EndpointState{Name: ef.Name, Buckets: make([]uint64, numDurBuckets)}
		into[ef.Name] = es
	}
	es.Handled += ef.Calls
	for i, n := range ef.Buckets {
		es.Buckets[min(i, numDurBuckets-1)] += n
	}
	es.Errors += ef.Errors
	es.SumSeconds += float64(ef.Nanos) / 1e9
}

// ownerOf is the proc that made mesh id: its id is "<proc>.<n>" or the
// like; "" if it is not.
func ownerOf(id string) string {
	if i := bytes.LastIndexByte([]byte(id), '.'); i > 0 {
		return id[:i]
	}
	return ""
}

// procEndState is the state of a proc, or of a member on it, that ended.
func procEndState(n wire.GoneNotice) (string, string) {
	if n.Stopped {
		return "stopped", ""
	}
	return "failed", n.Reason
}

func extentOf(e Extent) jobctl.Extent {
	out := jobctl.Extent{}
	for _, d := range e.dims {
		out = append(out, jobctl.Dim{Name: d.Name, Size: d.Size})
	}
	return out
}

// ctlState answers an OpState request.
func (c *client) ctlState(ctx context.Context, body json.RawMessage) (any, error) {
	var req jobctl.StateRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("state request: %v", err)
		}
	}
	return c.state(ctx, req.Timeout), nil
}

// state is the job's state now, with the procs' figures asked for (at
// most every figuresEvery) and waited for at most timeout (0:
// jobctl.DefaultStateTimeout): what OpState answers, and what the
// dashboard and its metrics endpoint read (dashboardJob).
func (c *client) state(ctx context.Context, timeout time.Duration) *jobctl.JobState {
	if timeout <= 0 {
		timeout = jobctl.DefaultStateTimeout
	}
	c.feed.refresh(ctx, timeout)
	return c.feed.snapshot()
}

// ctlWatch answers an OpWatch request: a snapshot at once, then one each
// Interval in which the state changed (its figures included).
func (c *client) ctlWatch(ctx context.Context, body json.RawMessage, send func(any) error) (any, error) {
	var req jobctl.WatchRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, fmt.Errorf("watch request: %v", err)
		}
	}
	if req.Timeout <= 0 {
		req.Timeout = jobctl.DefaultStateTimeout
	}
	if req.Interval <= 0 {
		req.Interval = jobctl.DefaultInterval
	}
	req.Interval = max(req.Interval, jobctl.MinInterval)
	tick := time.NewTicker(req.Interval)
	defer tick.Stop()
	ans := &jobctl.WatchAnswer{}
	var last []byte
	for {
		c.feed.refresh(ctx, min(req.Timeout, req.Interval))
		s := c.feed.snapshot()
		at := s.At
		s.At = time.Time{}
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(b, last) {
			s.At = at
			if err := send(s); err != nil {
				return ans, nil // the caller went away
			}
			ans.Sent++
			last = b
		}
		select {
		case <-ctx.Done():
			return ans, nil
		case <-tick.C:
		}
	}
}

// recentLines is the last lines received, oldest first, and how many
// there were in all.
func (l *clientLogs) recentLines() ([]jobctl.LogLine, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(l.nRecent, jobctl.MaxLogLines)
	out := make([]jobctl.LogLine, 0, n)
	for i := l.nRecent - n; i < l.nRecent; i++ {
		ln := &l.recent[i%jobctl.MaxLogLines]
		stream := "stdout"
		if ln.Stream == logagg.Stderr {
			stream = "stderr"
		}
		out = append(out, jobctl.LogLine{At: ln.Time, Proc: ln.Proc, Stream: stream, Text: ln.Text})
	}
	return out, l.lines.Load()
}
