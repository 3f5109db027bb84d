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

// A proc's id may start with the key of the host whose bus it dials
// (h3.c-5: see HostKey). Such a host's bus, a leaf of the hub, delivers
// every proc subject under its key (proc.h3.>) on the host, to the
// subjects under local.h3 that its procs subscribe (Inbox): the hub and
// the other hosts learn of the host's procs once, whatever their number,
// and never of one proc that comes or goes. A message for such a proc is
// still sent to Proc(id); it arrives on Inbox(id), and Public gives back
// the subject it was sent to.

// HostKey is the key of the host whose bus proc id's subject is
// delivered by, or "" for an id without one.
func HostKey(id string) string {
	k, _, ok := strings.Cut(id, ".")
	if !ok {
		return ""
	}
	return k
}

// LocalPart is a proc id without its host key.
func LocalPart(id string) string {
	_, local, ok := strings.Cut(id, ".")
	if !ok {
		return id
	}
	return local
}

// ProcsOf is the prefix of the proc subjects under host key: what the
// host's bus delivers locally.
func (s Subjects) ProcsOf(key string) string { return s.prefix + "proc." + key }

// LocalOf is the prefix under which host key's bus delivers them.
func (s Subjects) LocalOf(key string) string { return s.prefix + localKey + key }

// Inbox is the subject proc id subscribes to on a bus that delivers the
// procs of host local locally (jobenv.Bus.Local): under local.<key> for
// a proc of that host, else its public subject, Proc(id).
func (s Subjects) Inbox(id, local string) string {
	if local != "" && HostKey(id) == local {
		return s.prefix + localKey + id
	}
	return s.Proc(id)
}

// Public is the subject a message that arrived on subject was sent to:
// Proc(id) for Inbox(id), else subject itself.
func (s Subjects) Public(subject string) string {
	if len(subject) > len(s.prefix)+len(localKey) && subject[:len(s.prefix)] == s.prefix && subject[len(s.prefix):len(s.prefix)+len(localKey)] == localKey {
		return s.prefix + "proc." + subject[len(s.prefix)+len(localKey):]
	}
	return subject
}

// localKey starts the keys of the subjects a host's bus delivers its
// procs' messages on.
const localKey = "local."

// MeshKey: see ProcKey.
func MeshKey(id string) string { return "mesh." + id }

// MeshOfKey is the mesh whose subject key is key, if it is one's.
func MeshOfKey(key string) (id string, ok bool) { return strings.CutPrefix(key, MeshKey("")) }

// Key is the short name of one of the job's subjects, or "" for a
// subject of another job. A proc's subject is named as sent: the key of
// Inbox(id) is ProcKey(id).
func (s Subjects) Key(subject string) string {
	if len(subject) <= len(s.prefix) || subject[:len(s.prefix)] != s.prefix {
		return ""
	}
	return s.Public(subject)[len(s.prefix):]
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
func (s Subjects) Link(agent string) string { return s.LinkPrefix() + agent }

// LinkPrefix is what every Link subject starts with.
func (s Subjects) LinkPrefix() string { return s.prefix + "link." }

// Hubs: a host that runs one of the hub's servers announces there the
// URL the leaves dial ("<index> <url>"), once it is joined to the hub, and
// again whenever asked on HubsAsk.
func (s Subjects) Hubs() string { return s.prefix + "hubs" }

// HubsAsk: a host about to start its leaf asks the hub's servers to
// announce themselves.
func (s Subjects) HubsAsk() string { return s.prefix + "hubs.ask" }

// ValidHostKey reports whether s can be a host key: one token of a
// subject, of the characters of an id.
func ValidHostKey(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
