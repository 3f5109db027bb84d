package jobview

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// MaxStopped bounds the stopped actor meshes the model remembers: past it
// the oldest are forgotten.
const MaxStopped = 1024

// ClockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const ClockTicks = 100

// Model is the client's live model of the job: events in (its methods,
// each with the time it happened where it matters), a snapshot out
// (Snapshot). It reads no clock, runs nothing and sends nothing; it is not
// safe for concurrent use (Feed holds one under its lock).
type Model struct {
	seq       uint64
	hosts     map[string]*jobctl.HostState // by agent
	hostOrder []string
	meshes    map[string]*mesh // by id
	meshOrder []string
	nStopped  int
	events    [jobctl.MaxEvents]jobctl.Event // a ring
	nEvents   uint64                         // events ever
	totals    jobctl.Totals                  // events ever, by kind
	figures   map[string]Said                // by proc: what it said last
}

// Mesh is an actor mesh registered with the client.
type Mesh struct {
	ID, Name, Type string
	Owner          string   // the proc of its restart policy's owner, or ""
	Procs          []string // each member's proc, by base rank
	Extent         jobctl.Extent
}

// mesh is an actor mesh the model knows.
type mesh struct {
	Mesh
	stopped bool
	marks   map[int]mark   // members not running, by base rank
	moved   map[int]string // members restarted on a new proc: its id
}

// mark is a member's state other than running.
type mark struct {
	state, reason string
}

// memberAt is a member (by base rank) on a proc: what a proc says of a
// member that moved counts only while the member is there.
type memberAt struct {
	rank int
	proc string
}

// Failure is a member's failure, as supervision tells it.
type Failure struct {
	MeshID, Mesh string // the mesh's id and name
	Base         int    // the member's base rank
	ActorID      string
	Proc         string
	Reason       string
}

// Said is a proc's figures and when it gave them.
type Said struct {
	Figures
	At time.Time
}

// NewModel is a model of a job with nothing in it yet.
func NewModel() *Model {
	return &Model{hosts: map[string]*jobctl.HostState{}, meshes: map[string]*mesh{}, figures: map[string]Said{}}
}

// Heard takes a heartbeat of agent.
func (m *Model) Heard(agent string, at time.Time) {
	m.host(agent).LastHeartbeat = at
}

// host is agent's HostState, added if new.
func (m *Model) host(agent string) *jobctl.HostState {
	h := m.hosts[agent]
	if h == nil {
		h = &jobctl.HostState{Agent: agent, State: "up"}
		m.hosts[agent] = h
		m.hostOrder = append(m.hostOrder, agent)
		m.seq++
	}
	return h
}

// MeshAdded takes a mesh registered with the client; one it knows is
// ignored.
func (m *Model) MeshAdded(w Mesh) {
	if m.meshes[w.ID] != nil {
		return
	}
	m.meshes[w.ID] = &mesh{Mesh: w, marks: map[int]mark{}}
	m.meshOrder = append(m.meshOrder, w.ID)
	m.seq++
}

// MeshStopped takes the stop of mesh id; past MaxStopped stopped meshes
// the oldest is forgotten, and its id returned (else "").
func (m *Model) MeshStopped(id string) (forgot string) {
	ms := m.meshes[id]
	if ms == nil || ms.stopped {
		return ""
	}
	ms.stopped = true
	m.seq++
	if m.nStopped++; m.nStopped <= MaxStopped {
		return ""
	}
	for i, old := range m.meshOrder {
		if m.meshes[old].stopped {
			delete(m.meshes, old)
			m.meshOrder = slices.Delete(m.meshOrder, i, i+1)
			m.nStopped--
			return old
		}
	}
	return ""
}

// Failed takes a member's failure that the client's supervision saw.
func (m *Model) Failed(at time.Time, f Failure) {
	if ms := m.meshes[f.MeshID]; ms == nil || ms.marks[f.Base].state != "restarting" {
		m.mark(f.MeshID, f.Base, "failed", f.Reason)
	}
	m.event(jobctl.Event{At: at, Kind: "failure", Mesh: f.Mesh, Rank: f.Base, Proc: f.Proc, Reason: f.Reason})
}

// ProcEnded takes the end of a proc.
func (m *Model) ProcEnded(at time.Time, proc, reason string, stopped bool) {
	if stopped {
		reason = "stopped"
	}
	m.event(jobctl.Event{At: at, Kind: "proc_ended", Rank: -1, Proc: proc, Reason: reason})
}

// Moved takes members of mesh id restarted on proc.
func (m *Model) Moved(id string, ranks []int, proc string) {
	ms := m.meshes[id]
	if ms == nil {
		return
	}
	if ms.moved == nil {
		ms.moved = map[int]string{}
	}
	for _, b := range ranks {
		if b >= 0 && b < len(ms.Procs) {
			ms.moved[b] = proc
		}
	}
	m.seq++
}

// RestartDone takes the end of a restart of members ranks of mesh id:
// those in failed did not come back.
func (m *Model) RestartDone(id string, ranks []int, failed []Failure) {
	if ms := m.meshes[id]; ms != nil {
		for _, b := range ranks {
			if ms.marks[b].state == "restarting" {
				delete(ms.marks, b)
			}
		}
	}
	for _, f := range failed {
		m.mark(f.MeshID, f.Base, "failed", f.Reason)
	}
	m.seq++
}

// Unhandled takes a failure that reached the client's fault hook.
func (m *Model) Unhandled(at time.Time, f Failure) {
	m.mark(f.MeshID, f.Base, "failed", f.Reason)
	m.event(jobctl.Event{At: at, Kind: "unhandled", Mesh: f.Mesh, Rank: f.Base, Proc: f.Proc, Reason: f.Reason})
}

// Supervising takes a failure handed to its owner's Supervise.
func (m *Model) Supervising(f Failure) {
	m.mark(f.MeshID, f.Base, "failed", f.Reason)
}

// Restarting takes a restart, by its mesh's policy, of members ranks of
// mesh id after failure f.
func (m *Model) Restarting(at time.Time, id string, ranks []int, f Failure) {
	for _, b := range ranks {
		m.mark(id, b, "restarting", f.Reason)
	}
	m.event(jobctl.Event{At: at, Kind: "restart", Mesh: m.name(id), Rank: -1, Ranks: ranks, Reason: f.ActorID + " failed: " + f.Reason})
}

// GaveUp takes a restart policy giving up on members ranks of mesh id.
func (m *Model) GaveUp(at time.Time, id string, ranks []int, reason string) {
	for _, b := range ranks {
		m.mark(id, b, "failed", reason)
	}
	m.event(jobctl.Event{At: at, Kind: "gave_up", Mesh: m.name(id), Rank: -1, Ranks: ranks, Reason: reason})
}

// name is the name of mesh id, or id if the model does not know it.
func (m *Model) name(id string) string {
	if ms := m.meshes[id]; ms != nil {
		return ms.Name
	}
	return id
}

func (m *Model) mark(id string, b int, state, reason string) {
	ms := m.meshes[id]
	if ms == nil || b < 0 || b >= len(ms.Procs) {
		return
	}
	if state == "failed" && ms.marks[b].state == "restarting" {
		return // the restart's end says how it went
	}
	ms.marks[b] = mark{state: state, reason: reason}
	m.seq++
}

func (m *Model) event(e jobctl.Event) {
	t := &m.totals
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
	m.events[m.nEvents%jobctl.MaxEvents] = e
	m.nEvents++
	m.seq++
}

// Answer is one proc's answer in a round of asking for figures: nil
// Figures when it gave none.
type Answer struct {
	Proc    string
	Figures *Figures
	At      time.Time
}

// FiguresAnswered takes a round of asking the procs there are for their
// figures: a proc that gave none keeps what it said last; a proc not
// asked is forgotten (so the model holds only the procs there are).
func (m *Model) FiguresAnswered(round []Answer) {
	next := make(map[string]Said, len(round))
	for _, a := range round {
		if a.Figures != nil {
			next[a.Proc] = Said{*a.Figures, a.At}
		} else if old, ok := m.figures[a.Proc]; ok {
			next[a.Proc] = old
		}
	}
	m.figures = next
}

// Live is what the runtime knows at the moment of a snapshot, beside the
// model: its identity, the proc meshes it started, the ends its health
// table saw, where procs run, what it sent and the last log lines.
type Live struct {
	At       time.Time
	Job      string
	Client   jobctl.ProcState // the client's own process: Proc, Host, PID
	Counting bool             // the job's processes count for the feed
	// ProcMeshes are those the client started, in order; a proc started
	// in the place of one that ended is a mesh of one that Replaces it.
	ProcMeshes []ProcMesh
	// Gone says whether proc or agent id ended, and how.
	Gone func(id string) (Gone, bool)
	// HostOf is the host proc runs or ran on, as it announced it; "".
	HostOf func(proc string) string
	// Sent is what the client sent to mesh id, or nil.
	Sent     func(id string) *Sent
	Logs     []jobctl.LogLine
	LogLines int64
}

// ProcMesh is a proc mesh the client started.
type ProcMesh struct {
	Name     string
	Extent   jobctl.Extent
	Command  bool // WithCommand: it runs a command, not this program
	Procs    []Proc
	Replaces string // the proc it took the place of, or ""
}

// Proc is a proc the client started.
type Proc struct {
	ID, Host, Agent string
	PID             int
}

// Gone is how a proc (or an agent) ended.
type Gone struct {
	Reason  string
	Stopped bool
}

// Sent is what the client sent to one mesh: calls to the whole mesh, and
// by base rank the other calls (to one member, or to a slice) that reached
// that member. A member's Sent is Whole and its own; the mesh's the sum of
// its members'.
type Sent struct {
	Whole uint64
	One   []uint64
}

// Snapshot is the job's state as l and the model have it. The agents of
// the procs started count as the job's hosts from then on.
func (m *Model) Snapshot(l Live) *jobctl.JobState {
	gone := l.Gone
	if gone == nil {
		gone = func(string) (Gone, bool) { return Gone{}, false }
	}
	s := &jobctl.JobState{Version: jobctl.StateVersion, Job: l.Job, At: l.At}
	// Hosts: the agents heard, and those of the procs started.
	hostNames := map[string]string{}
	for _, pm := range l.ProcMeshes {
		for _, p := range pm.Procs {
			if p.Agent != "" {
				m.host(p.Agent)
				if hostNames[p.Agent] == "" {
					hostNames[p.Agent] = p.Host
				}
			}
		}
	}
	s.Seq = m.seq
	for _, a := range m.hostOrder {
		h := *m.hosts[a]
		if h.Name == "" {
			h.Name = hostNames[a]
		}
		if g, ok := gone(a); ok {
			h.State, h.Reason = "gone", g.Reason
		}
		s.Hosts = append(s.Hosts, h)
	}
	handled, endpoints, down := m.summed()
	s.Counting = l.Counting
	s.Totals = m.totals
	s.Client = l.Client
	s.Client.State = "running"
	if said, ok := m.figures[s.Client.Proc]; ok {
		said.into(&s.Client)
	}
	// A proc started in the place of one that ended shows at its rank.
	successor := map[string]Proc{}
	for _, pm := range l.ProcMeshes {
		if pm.Replaces != "" && len(pm.Procs) == 1 {
			successor[pm.Replaces] = pm.Procs[0]
		}
	}
	for _, pm := range l.ProcMeshes {
		if pm.Replaces != "" {
			continue
		}
		ps := jobctl.ProcMeshState{Name: pm.Name, Extent: pm.Extent, Command: pm.Command}
		for r, p := range pm.Procs {
			n := 0
			for next, ok := successor[p.ID]; ok && n < len(successor); next, ok = successor[p.ID] {
				p = next
				n++
			}
			st := jobctl.ProcState{Proc: p.ID, Rank: r, Host: p.Host, PID: p.PID, State: "running", Respawns: n}
			if l.HostOf != nil {
				if h := l.HostOf(p.ID); h != "" {
					st.Host = h
				}
			}
			if g, ok := gone(p.ID); ok {
				st.State, st.Reason = g.state()
			}
			if said, ok := m.figures[p.ID]; ok {
				said.into(&st)
			}
			ps.Procs = append(ps.Procs, st)
		}
		s.ProcMeshes = append(s.ProcMeshes, ps)
	}
	for _, id := range m.meshOrder {
		ms := m.meshes[id]
		as := jobctl.ActorMeshState{ID: id, Name: ms.Name, Type: ms.Type, Extent: ms.Extent, Owner: ms.Owner, Stopped: ms.stopped}
		if as.Owner == "" {
			as.Owner = ownerOf(id)
		}
		var sent *Sent
		if l.Sent != nil {
			sent = l.Sent(id)
		}
		var whole uint64
		if sent != nil {
			whole = sent.Whole
		}
		for b, p := range ms.Procs {
			if moved, ok := ms.moved[b]; ok {
				p = moved
			}
			mem := jobctl.MemberState{Rank: b, Proc: p, State: "running", Handled: handled[id][b], Sent: whole}
			if sent != nil && b < len(sent.One) {
				mem.Sent += sent.One[b]
			}
			as.Sent += mem.Sent
			as.Handled += mem.Handled
			switch mk, marked := ms.marks[b]; {
			case ms.stopped:
				mem.State = "stopped"
			case marked:
				mem.State, mem.Reason = mk.state, mk.reason
			case down[id][memberAt{b, p}].state != "":
				// Its owner is an actor elsewhere: its proc says.
				d := down[id][memberAt{b, p}]
				mem.State, mem.Reason = d.state, d.reason
			default:
				if g, ok := gone(p); ok {
					mem.State, mem.Reason = g.state()
				}
			}
			as.Members = append(as.Members, mem)
		}
		for _, name := range slices.Sorted(maps.Keys(endpoints[id])) {
			as.Endpoints = append(as.Endpoints, *endpoints[id][name])
		}
		s.ActorMeshes = append(s.ActorMeshes, as)
	}
	n := min(m.nEvents, jobctl.MaxEvents)
	s.EventsDropped = m.nEvents - n
	for i := m.nEvents - n; i < m.nEvents; i++ {
		s.Events = append(s.Events, m.events[i%jobctl.MaxEvents])
	}
	s.Logs, s.LogLines = l.Logs, l.LogLines
	return s
}

// summed is what the procs said, summed: handled counts by mesh and base
// rank (a moved member's procs, each its part); endpoint figures by mesh;
// members not running, by mesh and where they are.
func (m *Model) summed() (map[string]map[int]uint64, map[string]map[string]*jobctl.EndpointState, map[string]map[memberAt]mark) {
	handled := map[string]map[int]uint64{}
	endpoints := map[string]map[string]*jobctl.EndpointState{}
	down := map[string]map[memberAt]mark{}
	for proc, said := range m.figures {
		for _, mh := range said.Handled {
			for _, d := range mh.Down {
				if down[mh.Mesh] == nil {
					down[mh.Mesh] = map[memberAt]mark{}
				}
				down[mh.Mesh][memberAt{d.Rank, proc}] = mark{state: d.State, reason: d.Reason}
			}
			if handled[mh.Mesh] == nil {
				handled[mh.Mesh] = map[int]uint64{}
			}
			for i, b := range mh.Ranks {
				if i < len(mh.Counts) {
					handled[mh.Mesh][b] += mh.Counts[i]
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
	return handled, endpoints, down
}

// into sets a proc's figures in st.
func (said Said) into(st *jobctl.ProcState) {
	st.CPUSeconds = float64(said.CPUTicks) / ClockTicks
	st.RSS, st.FiguresAt = said.RSS, said.At
	b := said.Bus
	st.Bus = &jobctl.BusState{InMsgs: b.InMsgs, OutMsgs: b.OutMsgs, InBytes: b.InBytes, OutBytes: b.OutBytes}
	st.Dropped = maps.Clone(said.Dropped)
}

// addEndpoint adds a proc's figures of an endpoint to those of its mesh,
// by name. A figure with more buckets than there are (a proc of another
// build) has its extra ones counted in the last.
func addEndpoint(into map[string]*jobctl.EndpointState, ef EndpointFigures) {
	es := into[ef.Name]
	if es == nil {
		es = &jobctl.EndpointState{Name: ef.Name, Buckets: make([]uint64, NumDurBuckets)}
		into[ef.Name] = es
	}
	es.Handled += ef.Calls
	for i, n := range ef.Buckets {
		es.Buckets[min(i, NumDurBuckets-1)] += n
	}
	es.Errors += ef.Errors
	es.SumSeconds += float64(ef.Nanos) / 1e9
}

// ownerOf is the proc that made mesh id: its id is "<proc>.<n>" or the
// like; "" if it is not.
func ownerOf(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		return id[:i]
	}
	return ""
}

// state is the state of a proc, or of a member on it, that ended.
func (g Gone) state() (string, string) {
	if g.Stopped {
		return "stopped", ""
	}
	return "failed", g.Reason
}
