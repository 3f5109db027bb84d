package bus

import (
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// A silent hub server. A hub server whose process ends resets its links:
// its leaves notice at once and dial the next server. One whose host
// hangs, loses power or is cut off resets nothing, and a leaf judged by
// NATS's pings alone would hold its link to it for LeafMaxPingsOut pings
// (about 20 s), its host's messages lost meanwhile. Pings cannot be
// quicker: under a flood a pong waits behind megabytes. So a leaf also
// asks its server something every silenceProbe (a probe, which every hub
// server answers), and a link on which nothing at all came in for
// LeafSilence, an answer, a pong or any message, is cut, and the leaf
// dials the next server: a live server that is merely far behind is
// still sending. A leaf whose own clock ran late (its process starved or
// stopped) judges nothing for that time: the silence was its own.
//
// Silence alone is a suspicion: a hub server whose process is starved of
// CPU (its host busy, a long pause) sends nothing for a while too, and
// cutting its links then would move every leaf at once for nothing. So
// the silence is confirmed first by a signal the server's load cannot
// fake: a TCP connection to the port the link came in on, made by the
// server's kernel whether or not its process runs (within
// silenceConfirm). It is made only if the process lives (it holds the
// listening socket) and its host answers: then the server is late, and
// the link stays (NATS's pings remain the bound for a server that is
// stopped). Refused (the process is gone) or unanswered (its host or the
// network between is down): the link is cut.
//
// LeafSilence is longer than RouteStale, with a second to spare: the
// live servers must have dropped their routes to the silent one before
// the leaf links to one of them, or that server, still hearing of the
// leaf's interest from the silent one, takes the new link for a loop and
// NATS then waits 30 s before it dials again.
//
// The watch runs on leaves given several hub servers only. It has a cost
// there: a leaf cut off from a server that stays up (its host's network
// down for a few seconds) also cuts its link after LeafSilence, and
// dials the next server, which takes it for a loop for as long as the
// first holds the stale link (NATS pings leaves every 2 minutes), where
// the link left alone would have healed when the network came back.

// LeafSilence is how long a leaf's link to its hub may carry nothing in
// before the leaf cuts it and dials the next hub server.
const LeafSilence = 3 * time.Second

// silenceProbe is how often a leaf probes its hub server; starvedGap is
// a gap between the leaf's own ticks that means it was starved itself.
const (
	silenceProbe = 500 * time.Millisecond
	starvedGap   = time.Second
	// silenceConfirm bounds the connection that tells a late server
	// from a lost one.
	silenceConfirm = time.Second
)

// linkSilence is a leaf's watch on its link's silence, driven by
// watchLink's ticks.
type linkSilence struct {
	nc        *nats.Conn // in-process: sends the probes
	inbox     string
	link      uint64 // the link's connection id, 0 when down
	in        int64  // messages in on it when last looked
	heard     time.Time
	lastTick  time.Time
	lastProbe time.Time
	// confirming is set while a connection checks a silence; its answer
	// comes on verdict: true, the server's kernel answered.
	confirming bool
	verdict    chan bool
}

// startSilenceWatch opens the in-process connection that probes the hub.
func (s *Server) startSilenceWatch() (*linkSilence, error) {
	nc, err := nats.Connect("", nats.InProcessServer(s.ns), nats.Token(s.token), nats.NoReconnect(), nats.Name("leaf silence probe"))
	if err != nil {
		return nil, err
	}
	l := &linkSilence{nc: nc, inbox: nc.NewRespInbox(), verdict: make(chan bool, 1)}
	// The answers are wanted (else the hub would not send them), and
	// dropped: their arrival on the link is what counts.
	if _, err := nc.Subscribe(l.inbox, func(*nats.Msg) {}); err != nil {
		nc.Close()
		return nil, err
	}
	return l, nil
}

// tick looks at the link at now: it probes the hub when due, and cuts a
// link that has been silent for LeafSilence.
func (s *Server) silenceTick(l *linkSilence, now time.Time) {
	late := !l.lastTick.IsZero() && now.Sub(l.lastTick) > starvedGap
	l.lastTick = now
	lz, err := s.ns.Leafz(nil)
	if err != nil || len(lz.Leafs) == 0 {
		l.link = 0 // down: NATS dials again
		return
	}
	lf := lz.Leafs[0]
	if lf.ID != l.link || lf.InMsgs != l.in || late {
		l.link, l.in, l.heard = lf.ID, lf.InMsgs, now
	}
	if now.Sub(l.lastProbe) >= silenceProbe {
		l.lastProbe = now
		l.nc.PublishRequest(probeSubject, l.inbox, nil)
	}
	addr := net.JoinHostPort(lf.IP, strconv.Itoa(lf.Port))
	if l.confirming {
		select {
		case alive := <-l.verdict:
			l.confirming = false
			if alive {
				// Late, not lost: judged again after another silence.
				l.heard = now
				return
			}
			s.log.keep(false, "nothing came from the hub server at %s for %v, and its host does not take connections", []any{addr, LeafSilence})
			s.ns.DisconnectClientByID(lf.ID)
			l.link = 0
		default:
		}
		return
	}
	if now.Sub(l.heard) >= LeafSilence {
		l.confirming = true
		go func() {
			c, err := net.DialTimeout("tcp", addr, silenceConfirm)
			if err == nil {
				c.Close()
			}
			l.verdict <- err == nil
		}()
	}
}
