package actorrt

import (
	"fmt"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/wire"
)

// Host loss. A host agent that has started procs publishes a heartbeat on
// mon.<job>.hb.<agent> every heartbeatInterval. A proc that holds procs of
// another agent (it spawned them there, or received a mesh of them)
// watches that agent: silent for the host timeout (WithHostTimeout,
// default 5s), the agent is declared gone, and with it every proc it
// started, so calls waiting on them fail and their owners hear of it. An
// agent that ends is declared gone at once by its own agent; its procs go
// with it the same way.

const heartbeatInterval = time.Second

func (rt *runtimeT) heartbeatSubject(agent string) string {
	return bus.JobSubject(rt.job, bus.SubjectHeartbeat, agent)
}

// heartbeats publishes this agent's heartbeat once it has started a proc.
func (rt *runtimeT) heartbeats() {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		if rt.host.started.Load() {
			h := wire.Header{Kind: wire.KindControl, Method: wire.OpHeartbeat, ReplyTo: rt.procID, Rank: -1}
			if w, err := rt.newFrame(&h); err == nil {
				w.Enc.EncodeNil()
				rt.publish(rt.heartbeatSubject(rt.procID), w.Bytes())
				w.Free()
			}
		}
		select {
		case <-t.C:
		case <-rt.ctx.Done():
			return
		}
	}
}

// noteAgents records which agent started each proc, and watches agents
// other than this proc's own.
func (rt *runtimeT) noteAgents(procs []procInfo) {
	var subscribe []string
	rt.health.mu.Lock()
	if rt.health.agentOf == nil {
		rt.health.agentOf = map[string]string{}
		rt.health.lastBeat = map[string]time.Time{}
	}
	for _, p := range procs {
		if p.Agent == "" {
			continue
		}
		rt.health.agentOf[p.ID] = p.Agent
		if p.Agent == rt.procID {
			continue
		}
		if _, watched := rt.health.lastBeat[p.Agent]; !watched {
			rt.health.lastBeat[p.Agent] = time.Now()
			subscribe = append(subscribe, p.Agent)
		}
	}
	rt.health.mu.Unlock()
	for _, a := range subscribe {
		if _, err := rt.conn.Subscribe(rt.heartbeatSubject(a)); err != nil {
			rt.log.Warn().Err(err).Str("agent", a).Msg("cannot watch a host agent")
		}
	}
}

func (rt *runtimeT) sawHeartbeat(agent string) {
	rt.health.mu.Lock()
	if _, watched := rt.health.lastBeat[agent]; watched {
		rt.health.lastBeat[agent] = time.Now()
	}
	rt.health.mu.Unlock()
}

// watchAgents declares silent agents gone.
func (rt *runtimeT) watchAgents() {
	t := time.NewTicker(heartbeatInterval / 4)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-rt.ctx.Done():
			return
		}
		var silent []string
		rt.health.mu.Lock()
		for a, last := range rt.health.lastBeat {
			if _, gone := rt.health.gone[a]; !gone && time.Since(last) > rt.opts.hostTimeout {
				silent = append(silent, a)
			}
		}
		rt.health.mu.Unlock()
		for _, a := range silent {
			n := wire.GoneNotice{Proc: a, Reason: fmt.Sprintf("host agent %s silent for %v (host lost?)", a, rt.opts.hostTimeout)}
			rt.procGone(n)
			rt.announceGone(n)
		}
	}
}

// goneWithAgent declares gone every proc started by an agent that is gone.
func (rt *runtimeT) goneWithAgent(agent string, why string) {
	var procs []string
	rt.health.mu.Lock()
	for p, a := range rt.health.agentOf {
		if a == agent {
			if _, gone := rt.health.gone[p]; !gone {
				procs = append(procs, p)
			}
		}
	}
	rt.health.mu.Unlock()
	for _, p := range procs {
		rt.procGone(wire.GoneNotice{Proc: p, Reason: "its host agent " + agent + " is gone: " + why})
	}
}
