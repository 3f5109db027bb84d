package actorrt

import (
	"fmt"
	"strings"
	"sync"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/wire"
)

// agentWatch takes, for a runtime, what tells the host agents it watches
// live: their heartbeats and the link watcher's word on their links (what
// confirms a silence). Both are taken as they arrive, beside the ordered
// path: a dispatcher far behind under a flood must not make a live host
// look silent.
//
// The client watches every agent of the job (it starts the hosts), so it
// subscribes to all their heartbeats and all their links with one
// wildcard each, and ignores the agents it does not watch (yet): the hub
// then tells every leaf of two subjects, not of two a host, which at 1,024
// hosts is 2 M interest updates fewer (docs/scale.md, "At spawn:
// interest"). A proc watches the few agents of the procs it holds, a
// subject each.
type agentWatch struct {
	once    sync.Once // the client's wildcards
	watched sync.Map  // agent id -> struct{}: the agents the client watches
}

// watch starts watching agent for rt.
func (w *agentWatch) watch(rt *core, agent string) {
	if !rt.role.root() {
		w.subscribe(rt, rt.subjects.Heartbeat(agent), rt.subjects.Link(agent), agent)
		return
	}
	w.watched.Store(agent, struct{}{})
	w.once.Do(func() {
		w.subscribe(rt, rt.subjects.HeartbeatPrefix()+">", rt.subjects.LinkPrefix()+">", "every agent")
	})
}

// subscribe watches the heartbeats on hb and the link events on link,
// for what (an agent, or every agent).
func (w *agentWatch) subscribe(rt *core, hb, link, what string) {
	_, err := rt.link.Watch(hb, func(m bus.Message) {
		agent, ok := w.of(rt, m.Subject, rt.subjects.HeartbeatPrefix())
		if !ok {
			return
		}
		f, err := wire.Parse(m.Data)
		if err == nil && (f.Kind != wire.KindControl || f.Method != wire.OpHeartbeat || f.ReplyTo != agent) {
			err = fmt.Errorf("not a heartbeat of %s (kind %d, op %.20q, from %.40q)", agent, f.Kind, f.Method, f.ReplyTo)
		}
		if err != nil {
			rt.drop(wire.DropFrame, m.Subject, err)
			return
		}
		rt.health.heard(agent)
		rt.role.heardAgent(agent)
	})
	if err != nil {
		rt.log.Warn().Err(err).Str("agent", what).Msg("cannot watch a host agent")
	}
	_, err = rt.link.Watch(link, func(m bus.Message) {
		agent, ok := w.of(rt, m.Subject, rt.subjects.LinkPrefix())
		if !ok {
			return
		}
		up, cause, err := parseLinkEvent(m.Data)
		if err != nil {
			rt.drop(wire.DropFrame, m.Subject, err)
			return
		}
		rt.health.link(agent, up, cause)
	})
	if err != nil {
		rt.log.Warn().Err(err).Str("agent", what).Msg("cannot watch a host agent's link")
	}
}

// of is the agent a message on subject (under prefix) is about, and
// whether rt watches it: a proc subscribes only to the agents it
// watches; the client's wildcards bring every agent's, and anyone's
// holding the job's token, which it must not take for hosts.
func (w *agentWatch) of(rt *core, subject, prefix string) (string, bool) {
	agent, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", false
	}
	if rt.role.root() {
		_, ok = w.watched.Load(agent)
	}
	return agent, ok
}
