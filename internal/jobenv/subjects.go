package jobenv

import "strings"

// Subjects names the bus subjects of one job: mon.<job>.<what>. The
// runtime, the host agents and the launcher agree on them through this
// type; the bus gives them no meaning.
type Subjects struct{ prefix string }

// SubjectsOf returns the subjects of job.
func SubjectsOf(job string) Subjects { return Subjects{prefix: "mon." + job + "."} }

// Proc is a proc's inbox: calls to its system actor, replies to its
// ports, control messages (a host agent's too: an agent is addressed as a
// proc).
func (s Subjects) Proc(id string) string { return s.prefix + ProcKey(id) }

// Mesh is an actor mesh's subject: every proc hosting members subscribes.
func (s Subjects) Mesh(id string) string { return s.prefix + MeshKey(id) }

// ProcKey and MeshKey are the short names of a proc's and a mesh's
// subjects within the job: what sequencing fences name (Key turns a
// subject into one, Of back).
func ProcKey(id string) string { return "proc." + id }

// MeshKey: see ProcKey.
func MeshKey(id string) string { return "mesh." + id }

// MeshOfKey is the mesh whose subject key is key, if it is one's.
func MeshOfKey(key string) (id string, ok bool) { return strings.CutPrefix(key, MeshKey("")) }

// Key is the short name of one of the job's subjects, or "" for a
// subject of another job.
func (s Subjects) Key(subject string) string {
	if len(subject) <= len(s.prefix) || subject[:len(s.prefix)] != s.prefix {
		return ""
	}
	return subject[len(s.prefix):]
}

// Of is the subject a short name stands for.
func (s Subjects) Of(key string) string { return s.prefix + key }

// Deaths carries a notice for every proc host agent agent started that
// ends, and for the agent itself: whoever holds procs of that agent
// subscribes (so a notice reaches the procs that care, not the whole job).
// DeathsPrefix+"*" matches them all (the client's).
func (s Subjects) Deaths(agent string) string { return s.DeathsPrefix() + agent }

// DeathsPrefix is the common prefix of the Deaths subjects.
func (s Subjects) DeathsPrefix() string { return s.prefix + "deaths." }

// Log carries every line the job's procs write.
func (s Subjects) Log() string { return s.prefix + "log" }

// Up: every new proc announces itself once ("<proc> <host>").
func (s Subjects) Up() string { return s.prefix + "up" }

// Notice carries the client's notices to every proc: the job is about to
// end (a time limit) or is stopping (actorrt.PreemptNotice).
func (s Subjects) Notice() string { return s.prefix + "notice" }

// Counts: the client tells its launcher how many hosts and procs are up.
func (s Subjects) Counts() string { return s.prefix + "counts" }

// Failure: the client tells its launcher, once, before it exits with a
// failure, what failed (a jobstate.Failure, as JSON): the launcher records
// it and ends its output with its summary.
func (s Subjects) Failure() string { return s.prefix + "failure" }

// Agents: the client asks the launcher's host agents to report.
func (s Subjects) Agents() string { return s.prefix + "agents" }

// Heartbeat is where host agent agent heartbeats; HeartbeatPrefix+"*"
// matches them all.
func (s Subjects) Heartbeat(agent string) string { return s.HeartbeatPrefix() + agent }

// HeartbeatPrefix is the common prefix of the heartbeat subjects.
func (s Subjects) HeartbeatPrefix() string { return s.prefix + "hb." }

// AgentGone: the launcher saw host agent agent's process end; the payload
// says how. AgentGonePrefix+"*" matches them all.
func (s Subjects) AgentGone(agent string) string { return s.AgentGonePrefix() + agent }

// AgentGonePrefix is the common prefix of the AgentGone subjects.
func (s Subjects) AgentGonePrefix() string { return s.prefix + "agentgone." }

// Link is where the job's link watcher says host agent agent's link went
// up ("up") or down ("down <cause>"); see internal/hostlink.
func (s Subjects) Link(agent string) string { return s.prefix + "link." + agent }

// Hubs: a host that runs one of the hub's servers announces there the
// URL the leaves dial ("<index> <url>"), once it is joined to the hub, and
// again whenever asked on HubsAsk.
func (s Subjects) Hubs() string { return s.prefix + "hubs" }

// HubsAsk: a host about to start its leaf asks the hub's servers to
// announce themselves.
func (s Subjects) HubsAsk() string { return s.prefix + "hubs.ask" }
