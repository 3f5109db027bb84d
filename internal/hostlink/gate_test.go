package hostlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

func tcpAddr(s string) net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s))
}

// A source is an IPv4 address, an IPv6 /64, or the whole loopback: a
// user may dial from any 127.x address.
func TestSourceOf(t *testing.T) {
	groups := [][]string{
		{"127.0.0.1:1", "127.9.9.9:2", "[::1]:3", "[::ffff:127.0.0.2]:4"},
		{"10.0.0.1:1", "[::ffff:10.0.0.1]:2"},
		{"10.0.0.2:1"},
		{"[2001:db8::1]:1", "[2001:db8::ffff:1]:2"},
		{"[2001:db8:0:1::1]:1"},
		{"[fe80::1%eth0]:1", "[fe80::2%eth1]:2"},
	}
	of := map[netip.Prefix]int{}
	for i, group := range groups {
		for _, a := range group {
			k := sourceOf(tcpAddr(a))
			if j, ok := of[k]; ok && j != i {
				t.Errorf("%s counts as %v, the source of %v", a, k, groups[j])
			}
			of[k] = i
		}
	}
	if len(of) != len(groups) {
		t.Errorf("%d sources, want %d: %v", len(of), len(groups), of)
	}
}

// The gate holds at most maxPendingPerSource of a source and maxPending
// in all; once full, a newcomer of a source that holds less takes the
// place of the oldest of the source that holds the most, which is told
// (its context ends), and is not counted out twice.
func TestGateShares(t *testing.T) {
	g := newGate()
	ctx := context.Background()
	enter := func(addr string) (*pending, bool) { return g.enter(ctx, tcpAddr(addr)) }
	var first []*pending
	for i := range maxPending / maxPendingPerSource {
		for j := range maxPendingPerSource {
			p, ok := enter(fmt.Sprintf("10.0.0.%d:%d", i+1, j+1))
			if !ok {
				t.Fatalf("source %d, peer %d refused", i, j)
			}
			if j == 0 {
				first = append(first, p)
			}
		}
		if _, ok := enter(fmt.Sprintf("10.0.0.%d:9999", i+1)); ok {
			t.Fatalf("source %d: a peer over its bound entered", i)
		}
	}
	if total, most := g.pendingCounts(); total != maxPending || most != maxPendingPerSource {
		t.Fatalf("counts %d, %d", total, most)
	}
	// Full: a newcomer evicts the oldest of a source holding the most.
	p, ok := enter("10.9.9.9:1")
	if !ok {
		t.Fatal("a newcomer of a new source refused while others hold their whole share")
	}
	evicted := 0
	for _, f := range first {
		if f.ctx.Err() != nil {
			evicted++
			g.leave(f, false) // its handshake ends: counted out already
		}
	}
	if evicted != 1 {
		t.Fatalf("%d peers evicted, want 1", evicted)
	}
	if total, _ := g.pendingCounts(); total != maxPending {
		t.Fatalf("total %d after an eviction and its leave, want %d", total, maxPending)
	}
	// A source takes others' places until it holds as many, less one.
	n := 1
	for {
		if _, ok := enter(fmt.Sprintf("10.9.9.9:%d", n+1)); !ok {
			break
		}
		n++
	}
	// 16 sources at 32 less what the newcomer took: it stops one under
	// the biggest.
	if n < maxPendingPerSource-2 || n > maxPendingPerSource {
		t.Errorf("the newcomer holds %d", n)
	}
	g.leave(p, true)
	if total, _ := g.pendingCounts(); total != maxPending-1 {
		t.Errorf("total %d after a leave, want %d", total, maxPending-1)
	}
}

// Over loopback (one source), the watcher holds at most
// maxPendingPerSource peers in handshake, drops the others at once, and
// drops an idle one after helloWait; a real agent, refused meanwhile
// (then for the source's penalty), tries again and is admitted.
func TestPendingBounds(t *testing.T) {
	w, events := startWatcher(t, WatcherOptions{})
	var held, dropped atomic.Int32
	done := make(chan struct{})
	for range maxPendingPerSource + 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			c, err := net.Dial("tcp", addrOf(w))
			if err != nil {
				if !again(err) {
					t.Error(err)
				}
				dropped.Add(1) // reset before connect returned
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			var challenge [challengeLen]byte
			if _, err := io.ReadFull(c, challenge[:]); err != nil {
				dropped.Add(1)
				return
			}
			held.Add(1)
			// Then nothing: dropped after helloWait.
			if _, err := c.Read(challenge[:]); !errors.Is(err, io.EOF) {
				t.Errorf("an idle peer: %v, want EOF (dropped)", err)
			}
		}()
	}
	// The agent comes when the idle ones fill the source's share.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if total, _ := w.gate.pendingCounts(); total == maxPendingPerSource {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle peers never filled the source's share")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Token: "secret"}); err != nil {
		t.Fatalf("the agent, after the idle peers' time: %v", err)
	}
	if e := next(t, events, 5*time.Second); !e.Up || e.Agent != "h1" {
		t.Fatalf("%+v", e)
	}
	for range maxPendingPerSource + 8 {
		<-done
	}
	if held.Load() != maxPendingPerSource || dropped.Load() != 8 {
		t.Errorf("%d peers held, %d dropped at once; want %d, 8", held.Load(), dropped.Load(), maxPendingPerSource)
	}
}

// A failure penalizes its source for penaltyFirst, doubling with each
// failure that follows within penaltyMost of the last penalty's end, up
// to penaltyMost; a proof forgives it; a failure long after the last
// penalty starts again; at most maxPenalized sources are remembered, the
// stale ones forgotten first.
func TestGatePenalty(t *testing.T) {
	g := newGate()
	a := sourceOf(tcpAddr("10.0.0.1:1"))
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if g.penalizedLocked(a, t0) {
		t.Fatal("penalized before any failure")
	}
	g.penalize(a, t0)
	if !g.penalizedLocked(a, at(penaltyFirst-1)) || g.penalizedLocked(a, at(penaltyFirst)) {
		t.Fatal("the first penalty is not penaltyFirst")
	}
	g.penalize(a, at(penaltyFirst))
	if !g.penalizedLocked(a, at(3*penaltyFirst-1)) || g.penalizedLocked(a, at(3*penaltyFirst)) {
		t.Fatal("the second penalty is not twice the first")
	}
	now := at(3 * penaltyFirst)
	for range 30 {
		g.penalize(a, now)
	}
	if until := g.penalties[a].until; until != now.Add(penaltyMost) {
		t.Fatalf("after 32 failures: until %v, want penaltyMost after", until.Sub(now))
	}
	// Long after: forgotten, the first penalty again.
	later := now.Add(penaltyMost + 2*penaltyMost + time.Millisecond)
	g.penalize(a, later)
	if g.penalizedLocked(a, later.Add(penaltyFirst)) {
		t.Fatal("old failures still count")
	}
	// A proof forgives.
	p, _ := g.enter(context.Background(), tcpAddr("10.0.0.1:2"))
	g.leave(p, true)
	if g.penalties[a] != nil {
		t.Fatal("a proof did not forgive its source")
	}
	// Bounded: once full, stale ones go; if none is stale, a new source
	// is not remembered.
	for i := range maxPenalized {
		g.penalize(netip.PrefixFrom(netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)}), 32), t0)
	}
	g.penalize(a, t0)
	if len(g.penalties) != maxPenalized || g.penalties[a] != nil {
		t.Fatalf("%d penalties, %v for a new one, none stale", len(g.penalties), g.penalties[a])
	}
	g.penalize(a, t0.Add(penaltyFirst+penaltyMost+time.Millisecond))
	if len(g.penalties) != 1 || g.penalties[a] == nil {
		t.Fatalf("%d penalties after the stale went", len(g.penalties))
	}
}
