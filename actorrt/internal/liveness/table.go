package liveness

import (
	"fmt"
	"slices"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
)

// Table is what a process knows of the rest of its job's health:
// which procs are gone, and which host agent started each proc it holds,
// so that when an agent is gone (it ended, or was lost) its procs are
// gone with it.
//
// An agent's silence alone is a suspicion, not a verdict: a starved host
// is late, not dead. A silent agent (no heartbeat for the host timeout)
// is suspected, and lost only once a second signal confirms it: its link
// to the job's link watcher is down (its process ended, its host or the
// network between is gone: see internal/hostlink), or it stays silent,
// its host still answering, for lostAfter (stopped, or wedged). A
// heartbeat clears a suspicion. It is a plain state machine: each event is
// a method of its own (ProcGone, Started, Heard, LinkChanged, Tick), and
// returns the effects, which the runtime then carries out (failing the
// calls that wait on a gone proc, telling supervision, announcing the end
// to the job, watching an agent's heartbeats): each effect is a type with
// a method of its own in Applier, so an effect nobody carries out
// does not compile. It does no I/O, reads no clock (time comes in the
// events) and starts no goroutine; it is not safe for concurrent use: its
// driver holds a lock around each event (actorrt's health).
type Table struct {
	self      string        // this process's proc id: its own agent is not watched
	timeout   time.Duration // an agent silent this long is suspected
	lostAfter time.Duration // a suspect silent this long is lost, link or not; <= timeout: no suspicion, as where no link watcher confirms

	gone      map[string]wire.GoneNotice
	agentOf   map[string]string    // proc -> the agent that started it
	lastHeard map[string]time.Time // watched agents -> when last heard from
	// hostOf names each agent's host, for messages: users know hosts by
	// name, and an agent's id (h0, h1...) is an index that reads like
	// one. It comes with the procs (started): a proc runs on the host
	// of the agent that started it, and the launcher's agents reported
	// their own hosts when they said hello (launchedAgents.hosts).
	hostOf map[string]string
	// suspect holds the watched agents silent past the timeout.
	suspect map[string]bool
	// linkDown holds, for each agent whose link the job's link watcher
	// reported down (and not up since), why.
	linkDown map[string]string
}

// Proc is a proc the table is told of: its id, the host agent that
// started it, and that agent's host.
type Proc struct {
	ID, Agent, Host string
}

// NewTable is the table of process self: an agent silent for timeout is
// suspected, and lost after lostAfter.
func NewTable(self string, timeout, lostAfter time.Duration) *Table {
	return &Table{self: self, timeout: timeout, lostAfter: lostAfter, gone: map[string]wire.GoneNotice{},
		agentOf: map[string]string{}, lastHeard: map[string]time.Time{}, hostOf: map[string]string{},
		suspect: map[string]bool{}, linkDown: map[string]string{}}
}

// agentOn names agent for a message: by its host ("host agent on h2")
// when known, else by its id.
func (t *Table) agentOn(agent string) string {
	if h := t.hostOf[agent]; h != "" {
		return "host agent on " + h
	}
	return "host agent " + agent
}

// Effect is one thing a Table asks for: one of the eff types
// below, each carried out by the applier's method of its own.
type Effect interface {
	ApplyTo(a Applier)
}

// Applier carries out a Table's effects: a new kind of effect
// is a new method here, which every driver must then have.
type Applier interface {
	Gone(Gone)
	Watch(Watch)
	Ask(Ask)
	Suspect(Suspect)
	Cleared(Cleared)
}

// The effects a Table asks for.
type (
	// Gone: proc is gone: fail the calls waiting on it, tell
	// supervision (unless it was stopped), and announce it if asked, to
	// the holders of procs of agent (the one that started it) and of
	// procs the gone proc started itself.
	Gone struct {
		Notice   wire.GoneNotice
		Announce bool
		Agent    string
	}
	// Watch: start watching agent: its heartbeats and the ends of its
	// procs.
	Watch struct{ Agent string }
	// Ask: ask agent which of procs have ended (they may have before
	// this process watched for it).
	Ask struct {
		Agent string
		Procs []string
	}
	// Suspect: agent has been silent for silent, its link up (or not
	// known): it is late, and lost if that lasts lostAfter.
	Suspect struct {
		Agent, Who string // Who names the agent by its host, for messages
		Silent     time.Duration
	}
	// Cleared: a suspect was heard again after silent.
	Cleared struct {
		Agent, Who string
		Silent     time.Duration
	}
)

func (e Gone) ApplyTo(a Applier)    { a.Gone(e) }
func (e Watch) ApplyTo(a Applier)   { a.Watch(e) }
func (e Ask) ApplyTo(a Applier)     { a.Ask(e) }
func (e Suspect) ApplyTo(a Applier) { a.Suspect(e) }
func (e Cleared) ApplyTo(a Applier) { a.Cleared(e) }

// The events a Table takes, each returning its effects in order.

// ProcGone: a proc (or host agent) is gone. announce asks that the job be
// told (the process that saw the end tells everyone; one that heard of it
// from the job does not repeat it).
func (t *Table) ProcGone(n wire.GoneNotice, announce bool) []Effect {
	return t.goneWithAgents(nil, n, announce)
}

// Started: these procs were started by these agents. fresh says this
// process is spawning them now (none can have ended yet); else they
// arrived as an argument, and may have ended already.
func (t *Table) Started(procs []Proc, fresh bool, at time.Time) []Effect {
	var out []Effect
	var ask map[string][]string // agent -> procs it started, new to this table
	var agents []string
	for _, p := range procs {
		if p.Agent != "" && p.Host != "" && t.hostOf[p.Agent] == "" {
			t.hostOf[p.Agent] = p.Host
		}
		if p.Agent == "" || p.Agent == t.self {
			continue // this process's own agent tells it directly
		}
		if _, known := t.agentOf[p.ID]; known {
			continue
		}
		t.agentOf[p.ID] = p.Agent
		if _, gone := t.gone[p.Agent]; gone {
			out = t.goneWithAgents(out, wire.GoneNotice{Proc: p.ID, Reason: "its " + t.agentOn(p.Agent) + " is gone", Status: -1}, false)
			continue
		}
		if _, watched := t.lastHeard[p.Agent]; !watched {
			t.lastHeard[p.Agent] = at
			out = append(out, Watch{p.Agent})
		}
		if !fresh {
			if ask == nil {
				ask = map[string][]string{}
			}
			if ask[p.Agent] == nil {
				agents = append(agents, p.Agent)
			}
			ask[p.Agent] = append(ask[p.Agent], p.ID)
		}
	}
	for _, a := range agents {
		out = append(out, Ask{a, ask[a]})
	}
	return out
}

// Heard: agent's heartbeat arrived.
func (t *Table) Heard(agent string, at time.Time) []Effect {
	last, watched := t.lastHeard[agent]
	if !watched {
		return nil
	}
	t.lastHeard[agent] = at
	if !t.suspect[agent] {
		return nil
	}
	delete(t.suspect, agent)
	return []Effect{Cleared{agent, t.agentOn(agent), at.Sub(last)}}
}

// LinkChanged: the job's link watcher says agent's link is up, or down
// and why.
func (t *Table) LinkChanged(agent string, up bool, cause string, at time.Time) []Effect {
	if up {
		delete(t.linkDown, agent)
		return nil
	}
	t.linkDown[agent] = cause
	if last, watched := t.lastHeard[agent]; watched && at.Sub(last) > t.timeout {
		return t.lost(nil, agent, at.Sub(last))
	}
	return nil
}

// Tick: time passes; silent agents are suspected, and suspects whose
// silence is confirmed are declared gone. starved says this process itself
// was starved since the last tick (the tick came late): its silence is not
// the agents', so they get a fresh start.
func (t *Table) Tick(at time.Time, starved bool) []Effect {
	if starved {
		for a := range t.lastHeard {
			t.lastHeard[a] = at
		}
		return nil
	}
	var silent []string
	for a, last := range t.lastHeard {
		if _, gone := t.gone[a]; !gone && at.Sub(last) > t.timeout {
			silent = append(silent, a)
		}
	}
	slices.Sort(silent) // effects in a stable order
	var out []Effect
	for _, a := range silent {
		quiet := at.Sub(t.lastHeard[a])
		_, down := t.linkDown[a]
		switch {
		case down || quiet > t.lostAfter:
			out = t.lost(out, a, quiet)
		case !t.suspect[a]:
			t.suspect[a] = true
			out = append(out, Suspect{a, t.agentOn(a), quiet})
		}
	}
	return out
}

// lost declares agent, silent for quiet, gone: its link is down, or it
// has been silent past lostAfter.
func (t *Table) lost(out []Effect, agent string, quiet time.Duration) []Effect {
	delete(t.suspect, agent)
	reason := fmt.Sprintf("%s silent for %v while its host still answers (stopped or wedged?)", t.agentOn(agent), t.lostAfter)
	if t.lostAfter <= t.timeout {
		// Nothing to confirm a silence with (no link watcher).
		reason = fmt.Sprintf("%s silent for %v (host lost?)", t.agentOn(agent), t.timeout)
	}
	if cause, down := t.linkDown[agent]; down {
		reason = fmt.Sprintf("%s silent for %v, its link down: %s", t.agentOn(agent), quiet.Truncate(100*time.Millisecond), cause)
	}
	return t.goneWithAgents(out, wire.GoneNotice{Proc: agent, Reason: reason, Status: -1}, true)
}

// goneWithAgents records n and, if n's proc is an agent, every proc it
// started that is not gone yet (they are only told, not announced: the
// job hears of the agent).
func (t *Table) goneWithAgents(out []Effect, n wire.GoneNotice, announce bool) []Effect {
	if _, dup := t.gone[n.Proc]; dup {
		return out
	}
	t.gone[n.Proc] = n
	delete(t.lastHeard, n.Proc)
	delete(t.suspect, n.Proc)
	agent, ok := t.agentOf[n.Proc]
	if !ok {
		agent = t.self // an end this process's own agent saw, or an agent's
	}
	out = append(out, Gone{n, announce, agent})
	var started []string
	for p, a := range t.agentOf {
		if a == n.Proc {
			started = append(started, p)
		}
	}
	slices.Sort(started)
	for _, p := range started {
		out = t.goneWithAgents(out, wire.GoneNotice{Proc: p, Reason: "its " + t.agentOn(n.Proc) + " is gone: " + n.Reason, Status: -1}, false)
	}
	return out
}

// Notice returns why proc is gone, if it is.
func (t *Table) Notice(proc string) (wire.GoneNotice, bool) {
	n, ok := t.gone[proc]
	return n, ok
}

// Knows says what the table knows of id: heard of (a proc some agent
// started, or an agent whose procs it holds or watches), and gone.
func (t *Table) Knows(id string) (heard, gone bool) {
	_, gone = t.gone[id]
	_, proc := t.agentOf[id]
	_, watched := t.lastHeard[id]
	return proc || watched || t.hostOf[id] != "", gone
}

// NumGone is how many procs are known to be gone.
func (t *Table) NumGone() int { return len(t.gone) }
