package hostlink

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Bounds on what the watcher spends on peers that have not proven
// themselves: anyone on the network may dial it.
const (
	// maxPending bounds the handshakes under way, all sources together.
	maxPending = 512
	// maxPendingPerSource bounds those of one source (see sourceOf).
	maxPendingPerSource = 32
	// helloWait bounds a peer's time from its connection to its proof
	// (the TLS handshake and its hello line): a peer that sends nothing
	// holds its slot no longer.
	helloWait = 5 * time.Second
	// maxDecodes bounds the MUNGE credentials decoded at once (a process
	// each), all sources together; a source decodes one at a time.
	maxDecodes = 4
	// decodeWait bounds a proof's wait for its decode: then the peer is
	// told the watcher is busy, and a real agent tries again.
	decodeWait = 3 * time.Second
	// A source whose peer failed to prove itself (in time) is refused
	// for penaltyFirst, doubled for each failure that follows within
	// penaltyMost of the last penalty's end, up to penaltyMost; a proof
	// forgives it. At most maxPenalized sources are remembered.
	penaltyFirst = 10 * time.Millisecond
	penaltyMost  = time.Second
	maxPenalized = 4096
)

// gate counts the peers whose handshakes are under way, by source, so
// that a flood from one source, or from a few, leaves room for the
// others: each source has at most maxPendingPerSource, and when all
// together reach maxPending a newcomer takes the place of the oldest
// peer of the source that holds the most, if that holds more than the
// newcomer's would. A source that keeps failing its proofs is refused
// for a while (its penalty), so that a flood costs an accept and a reset
// a connection, not a TLS handshake, nor a MUNGE decode. A gate is safe
// for concurrent use.
type gate struct {
	decodes chan struct{} // a slot per MUNGE decode under way

	mu        sync.Mutex
	total     int
	sources   map[netip.Prefix]*source
	penalties map[netip.Prefix]*penalty
}

// penalty is a source's failures of late, and when it may try again.
type penalty struct {
	failures int
	until    time.Time
}

// source is the peers of one source in handshake.
type source struct {
	key    netip.Prefix
	peers  []*pending    // oldest first
	decode chan struct{} // its one decode under way
}

// pending is one peer in handshake: its handshake ends when ctx does.
type pending struct {
	src     *source
	ctx     context.Context
	cancel  context.CancelFunc
	evicted bool // under gate.mu
}

func newGate() *gate {
	return &gate{decodes: make(chan struct{}, maxDecodes), sources: map[netip.Prefix]*source{}, penalties: map[netip.Prefix]*penalty{}}
}

// enter counts a peer from addr in, its handshake bounded by parent, or
// reports false when its source is penalized or at its bound, or all are
// and none holds more than its share.
func (g *gate) enter(parent context.Context, addr net.Addr) (*pending, bool) {
	key := sourceOf(addr)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.penalizedLocked(key, time.Now()) {
		return nil, false
	}
	s := g.sources[key]
	if s == nil {
		s = &source{key: key, decode: make(chan struct{}, 1)}
	}
	if len(s.peers) >= maxPendingPerSource {
		return nil, false
	}
	if g.total >= maxPending {
		var big *source
		for _, o := range g.sources {
			if big == nil || len(o.peers) > len(big.peers) {
				big = o
			}
		}
		if big == nil || len(big.peers) <= len(s.peers)+1 {
			return nil, false
		}
		victim := big.peers[0]
		victim.evicted = true
		victim.cancel() // its handshake ends: its deadline is put in the past
		g.drop(big, 0)
	}
	p := &pending{src: s}
	p.ctx, p.cancel = context.WithCancel(parent)
	s.peers = append(s.peers, p)
	g.sources[key] = s
	g.total++
	return p, true
}

// leave counts p out, its handshake over (unless it was evicted), and
// forgives or penalizes its source as it proved itself or not.
func (g *gate) leave(p *pending, proven bool) {
	p.cancel()
	g.mu.Lock()
	defer g.mu.Unlock()
	if proven {
		delete(g.penalties, p.src.key)
	} else if !p.evicted {
		g.penalize(p.src.key, time.Now())
	}
	if p.evicted {
		return
	}
	for i, q := range p.src.peers {
		if q == p {
			g.drop(p.src, i)
			return
		}
	}
}

// drop takes s's peer i out of the count; g.mu is held.
func (g *gate) drop(s *source, i int) {
	s.peers = append(s.peers[:i], s.peers[i+1:]...)
	g.total--
	if len(s.peers) == 0 {
		delete(g.sources, s.key)
	}
}

// penalized tells whether key is refused now.
func (g *gate) penalized(key netip.Prefix) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.penalizedLocked(key, time.Now())
}

func (g *gate) penalizedLocked(key netip.Prefix, now time.Time) bool {
	pen := g.penalties[key]
	return pen != nil && now.Before(pen.until)
}

// penalize counts a failure of key's at now; g.mu is held.
func (g *gate) penalize(key netip.Prefix, now time.Time) {
	pen := g.penalties[key]
	if pen == nil {
		if len(g.penalties) >= maxPenalized {
			for k, o := range g.penalties {
				if now.Sub(o.until) > penaltyMost {
					delete(g.penalties, k)
				}
			}
			if len(g.penalties) >= maxPenalized {
				return // the bounds hold without it
			}
		}
		pen = &penalty{}
		g.penalties[key] = pen
	}
	if now.Sub(pen.until) > penaltyMost {
		pen.failures = 0 // long ago: forgotten
	}
	pen.failures++
	pen.until = now.Add(min(penaltyFirst<<min(pen.failures-1, 20), penaltyMost))
}

// pendingCounts is the handshakes under way: all, and the most of one
// source.
func (g *gate) pendingCounts() (total, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sources {
		most = max(most, len(s.peers))
	}
	return g.total, most
}

// loopback is the one source of every loopback address: any user of a
// host may dial from any of 127.0.0.0/8.
var loopback = netip.PrefixFrom(netip.IPv6Loopback(), 128)

// sourceOf is the source a peer's address counts against: its IPv4
// address, its IPv6 /64 (what one host holds), or loopback.
func sourceOf(a net.Addr) netip.Prefix {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := ta.AddrPort().Addr().Unmap().WithZone("")
	switch {
	case ip.IsLoopback():
		return loopback
	case ip.Is4():
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}
