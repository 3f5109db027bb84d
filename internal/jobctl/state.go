package jobctl

import (
	"encoding/json"
	"time"
)

// The job state feed: a live model of the job, kept by its client.

const (
	// OpState asks for one snapshot of the job's state: a StateRequest
	// (it may be empty), answered by a JobState.
	OpState = "state"
	// OpWatch streams the job's state: a WatchRequest; each event is a
	// JobState, the first at once, then a new one whenever the state
	// changed, at most every Interval; the answer, once the caller asks
	// the op to end (or its bound passes), is a WatchAnswer.
	OpWatch = "watch"
)

// StateVersion is the version of JobState this package writes: a reader
// refuses or adapts to another. It grows when a field changes meaning or
// goes; fields added keep it.
const StateVersion = 1

// Bounds of the feed, so that a snapshot of a large long job stays small.
const (
	// MaxEvents is how many supervision events a JobState keeps: the last.
	MaxEvents = 256
	// MaxLogLines is how many of the job's last log lines it keeps.
	MaxLogLines = 100
	// MinInterval bounds how often OpWatch sends a snapshot.
	MinInterval = 100 * time.Millisecond
	// DefaultInterval is OpWatch's Interval unless asked.
	DefaultInterval = time.Second
)

// StateRequest asks for a snapshot.
type StateRequest struct {
	// Timeout bounds the wait for the procs' own figures (their CPU,
	// memory and handled counts); a proc that does not answer within it
	// keeps the figures it gave last. 0: DefaultStateTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// DefaultStateTimeout is StateRequest's Timeout unless asked.
const DefaultStateTimeout = time.Second

// StateBound is the bound of an OpState request: its Timeout and a margin.
func StateBound(body json.RawMessage) time.Duration {
	var r StateRequest
	json.Unmarshal(body, &r)
	if r.Timeout <= 0 {
		r.Timeout = DefaultStateTimeout
	}
	return r.Timeout + 5*time.Second
}

// WatchRequest asks for the job's state as it changes.
type WatchRequest struct {
	StateRequest
	// Interval is the least time between two snapshots (at least
	// MinInterval; 0: DefaultInterval).
	Interval time.Duration `json:"interval,omitempty"`
}

// WatchAnswer ends an OpWatch: how many snapshots were sent.
type WatchAnswer struct {
	Sent int `json:"sent"`
}

// JobState is a snapshot of a job, as its client sees it. Field by field:
type JobState struct {
	// Version is StateVersion of the writer.
	Version int `json:"version"`
	// Job is the job's id; At when the snapshot was taken; Seq counts
	// the changes the client saw (it grows with every change of the
	// model but the counts), so that two snapshots with the same Seq
	// differ at most in counts and figures.
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	Seq uint64    `json:"seq"`
	// Hosts are the job's hosts (their agents), in order of their first
	// sight.
	Hosts []HostState `json:"hosts"`
	// ProcMeshes are the proc meshes the client started, in order.
	ProcMeshes []ProcMeshState `json:"proc_meshes"`
	// ActorMeshes are the actor meshes of the job the client knows: every
	// mesh registered with it (every spawn registers its name), those
	// stopped too, in order of their registration.
	ActorMeshes []ActorMeshState `json:"actor_meshes"`
	// Events are the last supervision events the client saw, oldest
	// first: at most MaxEvents. EventsDropped counts those older, gone.
	Events        []Event `json:"events"`
	EventsDropped uint64  `json:"events_dropped"`
	// Logs are the job's last lines the client received, oldest first:
	// at most MaxLogLines. LogLines counts every line received.
	Logs     []LogLine `json:"logs"`
	LogLines int64     `json:"log_lines"`
	// Totals counts the supervision events since the client started,
	// those the ring forgot too.
	Totals Totals `json:"totals"`
	// Client is the client's own process (Proc "c"), as a proc mesh's
	// procs are shown: its CPU, memory and bus traffic, taken with the
	// procs' figures.
	Client ProcState `json:"client"`
	// Counting is false when the job's processes count nothing for the
	// feed (MONARCH_FEED=off, or the job file's [feed] enabled = false,
	// as the client has it): then every Sent, Handled and endpoint figure
	// is zero; the rest is there.
	Counting bool `json:"counting"`
}

// Totals counts supervision events by kind, since the client started.
type Totals struct {
	// Failures counts member failures ("failure" events).
	Failures uint64 `json:"failures"`
	// Restarts counts members restarted by a restart policy (each
	// "restart" event counts its Ranks).
	Restarts uint64 `json:"restarts"`
	// GaveUp counts members a restart policy gave up on.
	GaveUp uint64 `json:"gave_up"`
	// Unhandled counts failures that reached the client's fault hook.
	Unhandled uint64 `json:"unhandled"`
	// ProcsEnded counts the procs that ended ("proc_ended"), stopped
	// ones too; ProcsFailed those of them that were not stopped.
	ProcsEnded  uint64 `json:"procs_ended"`
	ProcsFailed uint64 `json:"procs_failed"`
}

// HostState is one host of the job: its agent.
type HostState struct {
	Agent string `json:"agent"` // the agent's proc id
	Name  string `json:"name"`  // the host's name ("" until known)
	// State is "up", or "gone" (the agent ended or was lost), then
	// Reason says why.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// LastHeartbeat is when the client last heard the agent's heartbeat;
	// zero if never (an agent the client does not watch: the client's
	// own host).
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
}

// ProcMeshState is a proc mesh the client started.
type ProcMeshState struct {
	Name    string      `json:"name"`
	Extent  Extent      `json:"extent"`
	Command bool        `json:"command,omitempty"` // WithCommand: no actors, no figures
	Procs   []ProcState `json:"procs"`             // by rank
}

// Extent is a mesh's shape: its dimensions, in order.
type Extent []Dim

// Dim is one dimension of an extent.
type Dim struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// ProcState is one proc.
type ProcState struct {
	Proc string `json:"proc"` // its id
	Rank int    `json:"rank"` // in its proc mesh
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// State is "running", "stopped" or "failed" (then Reason says why).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Respawns counts the procs started at this rank in the place of one
	// that ended (a restart policy's, by the host's agent): Proc, PID and
	// State are then the last one's.
	Respawns int `json:"respawns,omitempty"`
	// CPUSeconds is the CPU time (user and system) the proc used, RSS its
	// resident memory in bytes, both as it said last (FiguresAt; zero if
	// it never did: a command proc, or one that did not answer).
	CPUSeconds float64   `json:"cpu_seconds"`
	RSS        int64     `json:"rss_bytes"`
	FiguresAt  time.Time `json:"figures_at,omitzero"`
	// Bus is the traffic of its bus connection, and Dropped the messages
	// it dropped as malformed, by kind (its dispatcher's kinds, and its
	// bus connection's as "bus-<kind>"), as it said last; nil if it never
	// did.
	Bus     *BusState         `json:"bus,omitempty"`
	Dropped map[string]uint64 `json:"dropped,omitempty"`
}

// BusState is a process's bus traffic since it connected: messages and
// payload bytes. A bus message may carry many actor messages (a batch)
// or part of one (a chunk).
type BusState struct {
	InMsgs   uint64 `json:"in_msgs"`
	OutMsgs  uint64 `json:"out_msgs"`
	InBytes  uint64 `json:"in_bytes"`
	OutBytes uint64 `json:"out_bytes"`
}

// ActorMeshState is one actor mesh.
type ActorMeshState struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Extent Extent `json:"extent"`
	// Owner is the proc whose actor (or the client, "c") owns the mesh.
	Owner string `json:"owner"`
	// Stopped: the mesh was stopped (its members' State is "stopped").
	Stopped bool `json:"stopped,omitempty"`
	// Sent counts the calls this client sent to the mesh's members: the
	// sum of its members' Sent (a call to n members counts n); Handled
	// the messages its members handled, as their procs said last.
	Sent    uint64 `json:"sent"`
	Handled uint64 `json:"handled"`
	// Endpoints are what its members handled, endpoint by endpoint (and
	// Supervise), summed over the procs that said, by name; an endpoint
	// not called yet is left out.
	Endpoints []EndpointState `json:"endpoints,omitempty"`
	// Members, by rank.
	Members []MemberState `json:"members"`
}

// EndpointState is what the members of an actor mesh handled through
// one endpoint, as their procs said last. A member's counts survive its
// restart in place; a proc that ended keeps what it said last.
type EndpointState struct {
	Name string `json:"name"`
	// Handled counts the calls handled; Errors those that ended in an
	// error (returned, a panic, arguments that did not decode).
	Handled uint64 `json:"handled"`
	Errors  uint64 `json:"errors"`
	// Buckets counts the calls timed, one in TimedEvery of each member's
	// calls to the endpoint (its first, then every TimedEvery-th), by how
	// long the handler ran: Buckets[i] those that took more than
	// DurationBounds[i-1] and at most DurationBounds[i] (not cumulative);
	// the last, one past the bounds, those that took longer. SumSeconds
	// is their time in all: SumSeconds over the sum of Buckets is the
	// mean handler time.
	Buckets    []uint64 `json:"buckets"`
	SumSeconds float64  `json:"sum_seconds"`
}

// TimedEvery is how many of a member's calls to an endpoint make one
// timed: timing every call would cost the message path a clock read and
// two stores more per message.
const TimedEvery = 8

// The bounds of EndpointState.Buckets: 50 µs, doubling, 16 of them (the
// last 1.6384 s).
const (
	FirstDurationBound = 50 * time.Microsecond
	NumDurationBounds  = 16
)

// DurationBounds are the upper bounds of EndpointState.Buckets, in
// seconds: FirstDurationBound doubling, NumDurationBounds of them.
func DurationBounds() []float64 {
	out := make([]float64, NumDurationBounds)
	for i := range out {
		out[i] = float64(FirstDurationBound<<i) / 1e9 // correctly rounded: 1.6384, not 1.6383999999999999
	}
	return out
}

// MemberState is one member of an actor mesh.
type MemberState struct {
	Rank int `json:"rank"`
	// Proc is the proc the member runs on: a new one once a restart
	// moved it there (its first proc ended).
	Proc string `json:"proc"`
	// State is "running", "failed" (Reason says why), "restarting" (by
	// the mesh's restart policy) or "stopped": as the client's
	// supervision saw it, or, for a mesh an actor elsewhere owns, as the
	// member's proc said last.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Sent counts this client's calls that reached the member: those to
	// the whole mesh, to a slice it is in, and to it alone. Handled counts the
	// messages it handled (endpoint calls and Supervise), as its proc
	// said last: with a member a restart moved, the sum of what each of
	// its procs said.
	Sent    uint64 `json:"sent"`
	Handled uint64 `json:"handled"`
}

// Event is one supervision event.
type Event struct {
	At time.Time `json:"at"`
	// Kind is "failure" (a member failed: Mesh, Rank, Proc, Reason),
	// "proc_ended" (a proc ended: Proc, Reason; Reason "stopped" for a
	// stop), "restart" (members of Mesh are restarted by its policy:
	// Ranks), "gave_up" (a policy gave up on them: Reason) or "unhandled"
	// (a failure reached the client's fault hook).
	Kind   string `json:"kind"`
	Mesh   string `json:"mesh,omitempty"`
	Rank   int    `json:"rank"` // -1 when not about one member
	Ranks  []int  `json:"ranks,omitempty"`
	Proc   string `json:"proc,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// LogLine is one of the job's lines.
type LogLine struct {
	At     time.Time `json:"at"`
	Proc   string    `json:"proc"`
	Stream string    `json:"stream"` // "stdout" or "stderr"
	Text   string    `json:"text"`
}

// WatchBound is the bound of an OpWatch: the longest any op runs.
func WatchBound(json.RawMessage) time.Duration { return MaxOpTime }
