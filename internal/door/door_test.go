package door

import (
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The door on real loopback sockets. A test door counts the connections
// of each loopback address 127.0.0.N as a source of its own, 10.0.0.N
// (SourceOf counts all of loopback as one), so that fairness between
// sources shows on one machine.

// testDoor opens a door of limits in front of a listener on loopback,
// serving readable connections with serve, closed when the test ends.
func testDoor(t *testing.T, l Limits, serve func(*Conn)) (d *Door, addr string) {
	t.Helper()
	return testDoorOn(t, l, serve, func(c net.Conn) net.Conn { return c })
}

// testDoorOn is testDoor, each accepted connection wrapped by wrap.
func testDoorOn(t *testing.T, l Limits, serve func(*Conn), wrap func(net.Conn) net.Conn) (d *Door, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d, err = New(Config{Name: "test door", Limits: l, Serve: serve, Note: func(msg string) { t.Log(msg) }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer d.Close()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ip := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().As4()
			d.enterFrom(wrap(c), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, ip[3]}), 32))
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the door did not close within 30 s")
		}
	})
	return d, ln.Addr().String()
}

// src is the source a test door counts 127.0.0.n as.
func src(n byte) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, n}), 32) }

// dialFrom connects to addr from the loopback address 127.0.0.n, and
// sends first, if not empty; closed when the test ends.
func dialFrom(t testing.TB, n byte, addr string, first string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, n)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if first != "" {
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// openAtServer tells whether the server still holds c open: a read finds
// it closed (EOF, reset) or waits.
func openAtServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// answered reads the server's "ok" on c, within 20 s.
func answered(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var b [2]byte
	_, err := io.ReadFull(c, b[:])
	return err == nil && string(b[:]) == "ok"
}

// waitFor waits, 20 s at most, for cond.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s, still waiting for %s", what)
		}
	}
}

// prover is a listener's proof for the tests: a connection's first byte
// 'p' (and a tag byte) proves it, which is answered "ok" and kept until
// its peer hangs up; 'f' is a wrong proof; 's' starts one that never
// ends (the door's deadline, or a displacement, ends it).
type prover struct {
	mu     sync.Mutex
	served []byte             // the tags of the proven, in order
	failed time.Time          // when the last 'f' was refused
	starts map[byte]time.Time // when each tag's proof was read
}

func (p *prover) serve(c *Conn) {
	var b [2]byte
	if _, err := c.Read(b[:1]); err != nil {
		return
	}
	switch b[0] {
	case 'f':
		p.mu.Lock()
		p.failed = time.Now()
		p.mu.Unlock()
		return
	case 's':
		c.Read(b[:])
		return
	case 'p':
		if _, err := c.Read(b[1:]); err != nil || !c.Through() {
			return
		}
	}
	p.mu.Lock()
	if p.starts == nil {
		p.starts = map[byte]time.Time{}
	}
	p.starts[b[1]] = time.Now()
	p.served = append(p.served, b[1])
	p.mu.Unlock()
	c.SetDeadline(time.Time{})
	c.Write([]byte("ok"))
	io.Copy(io.Discard, c)
	c.Close()
}

// TestHoldsSilent: a connection that sends nothing is held, and nothing
// read of it, however many there are (within the bound); one that speaks
// is read at once, past them; a held one whose peer hangs up is let go at
// once, and one that stays silent between Hold and twice Hold after it
// came, never sooner.
func TestHoldsSilent(t *testing.T) {
	const hold = 2 * time.Second
	var p prover
	d, addr := testDoor(t, Limits{Prove: time.Minute, Hold: hold, Held: 1000, Reading: 8, PerSource: 4}, p.serve)
	start := time.Now()
	var silent []net.Conn
	for range 200 {
		silent = append(silent, dialFrom(t, 1, addr, ""))
	}
	waitFor(t, "200 held", func() bool { return d.Counts().Held == 200 })
	if c := dialFrom(t, 1, addr, "p1"); !answered(c) {
		t.Fatal("a client behind 200 silent connections of its source was not answered")
	}
	if n := d.Counts(); n.Reading != 0 || n.Held != 200 || n.Displaced != 0 {
		t.Fatalf("counts %+v", n)
	}
	silent[0].Close()
	waitFor(t, "a hung up connection let go", func() bool { return d.Counts().Held == 199 })
	open := 0
	for _, c := range silent[1:] {
		if openAtServer(c) {
			open++
		}
	}
	if time.Since(start) < hold && open != 199 {
		t.Fatalf("%d of 199 silent connections open before their hold", open)
	}
	waitFor(t, "the silent let go", func() bool { return d.Counts().Held == 0 })
	if took := time.Since(start); took < hold {
		t.Fatalf("silent connections let go after %v, before Hold (%v)", took, hold)
	}
	for _, c := range silent[1:] {
		if openAtServer(c) {
			t.Fatal("a silent connection let go by the door is still open")
		}
	}
	if n := d.Counts(); n.Expired != 199 {
		t.Fatalf("counts %+v, want 199 expired", n)
	}
}

// TestReadingBounds: the connections reading are bounded per source and
// overall; a readable one past its source's bound takes the place of its
// source's oldest, past the overall bound that of the busiest source's
// oldest; what gave way is closed; a proof goes through whatever held
// the others.
func TestReadingBounds(t *testing.T) {
	var p prover
	d, addr := testDoor(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: 100, Reading: 6, PerSource: 4}, p.serve)
	var one []net.Conn
	for i := range 4 {
		one = append(one, dialFrom(t, 1, addr, "s"))
		waitFor(t, "reading", func() bool { return d.Counts().Reading == i+1 })
	}
	one = append(one, dialFrom(t, 1, addr, "s"))
	waitFor(t, "the oldest of the source displaced", func() bool { return d.Counts().Displaced == 1 })
	if openAtServer(one[0]) || !openAtServer(one[1]) {
		t.Fatal("the source's oldest was not the one displaced")
	}
	two := []net.Conn{dialFrom(t, 2, addr, "s"), dialFrom(t, 2, addr, "s")}
	waitFor(t, "6 reading", func() bool { return d.Counts().Reading == 6 })
	three := dialFrom(t, 3, addr, "s")
	waitFor(t, "the busiest's oldest displaced", func() bool { return d.Counts().Displaced == 2 })
	if openAtServer(one[1]) || !openAtServer(one[2]) || !openAtServer(two[0]) || !openAtServer(three) {
		t.Fatal("the oldest of the busiest source was not the one displaced")
	}
	if n := d.Counts(); n.Reading != 6 || n.MostReading != 3 {
		t.Fatalf("counts %+v", n)
	}
	if c := dialFrom(t, 2, addr, "p2"); !answered(c) {
		t.Fatal("a proof among slow connections was not answered")
	}
}

// TestPenalties: with penalties, a source whose connection failed its
// proof is not read until its penalty ends: its readable connections
// wait, held, and are then read newest first; other sources are read
// meanwhile; a proof forgives its source.
func TestPenalties(t *testing.T) {
	const first = time.Second
	var p prover
	d, addr := testDoor(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: 100, Reading: 8, PerSource: 1,
		PenaltyFirst: first, PenaltyMost: 4 * first}, p.serve)
	wrong := dialFrom(t, 1, addr, "f")
	waitFor(t, "the wrong proof refused", func() bool { return !openAtServer(wrong) })
	var waiting []net.Conn
	for i := range 3 {
		waiting = append(waiting, dialFrom(t, 1, addr, "p"+string(rune('a'+i))))
		time.Sleep(10 * time.Millisecond) // in this order
	}
	if c := dialFrom(t, 2, addr, "px"); !answered(c) {
		t.Fatal("another source was not read while the first was penalized")
	}
	for _, c := range waiting {
		if !answered(c) {
			t.Fatal("a connection of a penalized source was never read")
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if got := strings.Trim(string(p.served), "x"); got != "cba" {
		t.Errorf("the penalized source's served in the order %q, want the newest first (cba)", got)
	}
	for _, tag := range []byte("abc") {
		if after := p.starts[tag].Sub(p.failed); after < first {
			t.Errorf("a connection of the penalized source read %v after its failure", after)
		}
	}
	if p.starts['x'].After(p.starts['c']) {
		t.Error("the other source was read after the penalized one")
	}
	if d.Penalized(src(1)) {
		t.Error("a proof did not forgive its source")
	}
}

// TestDisplacedPenalized: with penalties, a connection displaced while
// reading counts as a failure of its source, whose next readable
// connection then waits; one that waits and hangs up is let go at once.
func TestDisplacedPenalized(t *testing.T) {
	var p prover
	d, addr := testDoor(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: 100, Reading: 8, PerSource: 1,
		PenaltyFirst: time.Minute, PenaltyMost: time.Minute}, p.serve)
	first := dialFrom(t, 1, addr, "s")
	waitFor(t, "reading", func() bool { return d.Counts().Reading == 1 })
	dialFrom(t, 1, addr, "s")
	waitFor(t, "the first displaced", func() bool { return !openAtServer(first) })
	if !d.Penalized(src(1)) {
		t.Fatal("a displacement did not penalize its source")
	}
	waiter := dialFrom(t, 1, addr, "p1")
	waitFor(t, "waiting", func() bool { return d.Counts().Waiting == 1 })
	waiter.Close()
	waitFor(t, "a waiting peer that hung up let go", func() bool { n := d.Counts(); return n.Waiting == 0 && n.Held == 0 })
	if n := d.Counts(); n.Reading != 1 || n.Displaced != 1 {
		t.Fatalf("counts %+v", n)
	}
}

// TestPenaltyTimes: a failure penalizes its source for the first
// penalty, doubling with each failure that follows within the most of
// the last penalty's end, up to the most; a proof forgives it; a failure
// long after the last penalty starts again; at most maxPenalized sources
// are remembered, the stale ones forgotten first; without penalties,
// nothing is.
func TestPenaltyTimes(t *testing.T) {
	const first, most = 10 * time.Millisecond, time.Second
	p := penalties{first: first, most: most}
	a := src(1)
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	on := func(now time.Time) bool { _, on := p.on(a, now); return on }
	if on(t0) {
		t.Fatal("penalized before any failure")
	}
	p.fail(a, t0)
	if !on(at(first-1)) || on(at(first)) {
		t.Fatal("the first penalty is not the first")
	}
	p.fail(a, at(first))
	if !on(at(3*first-1)) || on(at(3*first)) {
		t.Fatal("the second penalty is not twice the first")
	}
	now := at(3 * first)
	for range 30 {
		p.fail(a, now)
	}
	if until, _ := p.on(a, now); until != now.Add(most) {
		t.Fatalf("after 32 failures: until %v, want the most after", until.Sub(now))
	}
	later := now.Add(most + 2*most + time.Millisecond)
	p.fail(a, later)
	if _, on := p.on(a, later.Add(first)); on {
		t.Fatal("old failures still count")
	}
	p.forgive(a)
	if p.bySource[a] != nil {
		t.Fatal("forgiven, still remembered")
	}
	for i := range maxPenalized {
		p.fail(netip.PrefixFrom(netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)}), 32), t0)
	}
	p.fail(a, t0)
	if len(p.bySource) != maxPenalized || p.bySource[a] != nil {
		t.Fatalf("%d penalties, %v for a new one, none stale", len(p.bySource), p.bySource[a])
	}
	p.fail(a, t0.Add(first+most+time.Millisecond))
	if len(p.bySource) != 1 || p.bySource[a] == nil {
		t.Fatalf("%d penalties after the stale went", len(p.bySource))
	}
	none := penalties{}
	none.fail(a, t0)
	if _, on := none.on(a, t0); on {
		t.Fatal("penalized without penalties")
	}
}

// TestHeldBound: past its bound, a door lets go of the oldest held
// connection of the source holding the most, not of the others.
func TestHeldBound(t *testing.T) {
	var p prover
	d, addr := testDoor(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: 10, Reading: 8, PerSource: 4}, p.serve)
	var flood []net.Conn
	for range 10 {
		flood = append(flood, dialFrom(t, 1, addr, ""))
	}
	waitFor(t, "10 held", func() bool { return d.Counts().Held == 10 })
	var others []net.Conn
	for range 3 {
		others = append(others, dialFrom(t, 2, addr, ""))
	}
	waitFor(t, "3 displaced", func() bool { return d.Counts().Displaced == 3 })
	for i, c := range flood {
		if openAtServer(c) != (i >= 3) {
			t.Fatalf("connection %d of the flood: open %v", i, !(i >= 3))
		}
	}
	for _, c := range others {
		if !openAtServer(c) {
			t.Fatal("a connection of the other source was let go")
		}
	}
}

// TestProcessBound: the doors of a process together hold no more than
// its bound: a door whose newcomers pass it makes the door that holds the
// most let go of its busiest source's oldest.
func TestProcessBound(t *testing.T) {
	bound := processDoors.bound
	waitFor(t, "no door holding anything", func() bool { return heldNow() == 0 })
	processDoors.bound = func() int64 { return 12 }
	t.Cleanup(func() { processDoors.bound = bound })
	var p prover
	a, addrA := testDoor(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: 100, Reading: 8, PerSource: 4}, p.serve)
	b, addrB := testDoor(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: 100, Reading: 8, PerSource: 4}, p.serve)
	for range 12 {
		dialFrom(t, 1, addrA, "")
	}
	waitFor(t, "12 held at the first door", func() bool { return a.Counts().Held == 12 })
	for range 4 {
		dialFrom(t, 2, addrB, "")
	}
	waitFor(t, "4 held at the second door, 4 let go at the first", func() bool { return b.Counts().Held == 4 && a.Counts().Displaced == 4 })
	if na, nb := a.Counts(), b.Counts(); na.Held != 8 || na.Displaced != 4 || nb.Displaced != 0 {
		t.Fatalf("the first door %+v, the second %+v", na, nb)
	}
}

// heldNow is what the open doors hold now.
func heldNow() int64 {
	processDoors.mu.Lock()
	defer processDoors.mu.Unlock()
	var n int64
	for d := range processDoors.all {
		n += d.heldN.Load()
	}
	return n
}

// TestCloseLetsGo: closing the door closes what it holds, what waits and
// what is reading, and returns once every Serve did; a proven connection
// is the listener's to close.
func TestCloseLetsGo(t *testing.T) {
	var p prover
	d, addr := testDoor(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: 100, Reading: 8, PerSource: 4,
		PenaltyFirst: time.Minute, PenaltyMost: time.Minute}, p.serve)
	proven := dialFrom(t, 2, addr, "pp")
	if !answered(proven) {
		t.Fatal("not answered")
	}
	silent, slow := dialFrom(t, 1, addr, ""), dialFrom(t, 2, addr, "s")
	dialFrom(t, 1, addr, "f")
	waitFor(t, "a failure", func() bool { return d.Penalized(src(1)) })
	waiter := dialFrom(t, 1, addr, "p1")
	waitFor(t, "held, waiting, reading", func() bool {
		n := d.Counts()
		return n.Held == 1 && n.Waiting == 1 && n.Reading == 1
	})
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	for _, c := range []net.Conn{silent, slow, waiter} {
		waitFor(t, "closed", func() bool { return !openAtServer(c) })
	}
	select {
	case <-closed:
		t.Fatal("Close returned before the proven connection's Serve")
	case <-time.After(100 * time.Millisecond):
	}
	proven.Close()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return once every Serve had")
	}
	d.Close() // again: at once
	if n := d.Counts(); n.Held+n.Waiting+n.Reading != 0 {
		t.Fatalf("after Close: %+v", n)
	}
}

// TestNotASocket: a connection with no socket to hold (a pipe) is read at
// once, under the same bounds.
func TestNotASocket(t *testing.T) {
	var p prover
	d, err := New(Config{Name: "pipes", Limits: Limits{Prove: time.Minute, Hold: time.Minute, Held: 10, Reading: 2, PerSource: 2}, Serve: p.serve})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	server, client := net.Pipe()
	defer client.Close()
	d.Enter(server)
	go client.Write([]byte("p1"))
	if !answered(client) {
		t.Fatal("a pipe was not read")
	}
}

// TestNewRefuses: a door without Serve, bounds or with penalties that
// shrink is refused, saying why.
func TestNewRefuses(t *testing.T) {
	ok := Limits{Prove: time.Second, Hold: time.Second, Held: 1, Reading: 1, PerSource: 1}
	serve := func(*Conn) {}
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"no serve", Config{Limits: ok}},
		{"no hold", Config{Limits: Limits{Prove: time.Second, Held: 1, Reading: 1, PerSource: 1}, Serve: serve}},
		{"no per source", Config{Limits: Limits{Prove: time.Second, Hold: time.Second, Held: 1, Reading: 1}, Serve: serve}},
		{"penalties shrink", Config{Limits: Limits{Prove: time.Second, Hold: time.Second, Held: 1, Reading: 1, PerSource: 1, PenaltyFirst: time.Second, PenaltyMost: time.Millisecond}, Serve: serve}},
	} {
		if d, err := New(tt.cfg); err == nil {
			d.Close()
			t.Errorf("%s: opened", tt.name)
		} else {
			t.Logf("%s: %v", tt.name, err)
		}
	}
}

// TestSpendsLittle: a connection that has not proved itself costs this
// process no goroutine and no read buffer: 400 of them, plain or under
// TLS not yet shaken hands, take less than 4 KiB each of its heap and
// stacks (the client's sockets included).
func TestSpendsLittle(t *testing.T) {
	const n = 400
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			wrap := func(c net.Conn) net.Conn { return c }
			if withTLS {
				wrap = func(c net.Conn) net.Conn { return tls.Server(c, &tls.Config{}) }
			}
			var p prover
			d, addr := testDoorOn(t, Limits{Prove: time.Minute, Hold: time.Minute, Held: n, Reading: 8, PerSource: 8}, p.serve, wrap)
			before := inUse()
			for range n {
				dialFrom(t, 1, addr, "")
			}
			waitFor(t, "every connection at the door", func() bool { return d.Counts().Held == n })
			grew := int64(inUse()) - int64(before)
			t.Logf("%d connections at the door: %d bytes each", n, grew/n)
			if grew/n > 4<<10 {
				t.Errorf("%d connections at the door took %d KiB each", n, grew/n>>10)
			}
		})
	}
}

// inUse is this process's heap and stacks in use, after a collection.
func inUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// TestSourceOf: a source is an IPv4 address, an IPv6 /64, or the whole
// loopback: a user may dial from any 127.x address.
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
			k := SourceOf(net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a)))
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

// TestQueues: the door's queues, which take a connection out without
// walking its source's list, agree with plain lists through pushes and
// removals in any order: each source's oldest and newest, its count, the
// busiest source, the total.
func TestQueues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := queues{states: held | waiting}
	model := map[netip.Prefix][]*Conn{}
	var live []*Conn
	sources := []netip.Prefix{src(1), src(2), src(3)}
	for step := range 20000 {
		if len(live) == 0 || rng.IntN(3) > 0 {
			c := &Conn{source: sources[rng.IntN(len(sources))], state: held << rng.IntN(2)}
			q.push(c)
			model[c.source] = append(model[c.source], c)
			live = append(live, c)
		} else {
			i := rng.IntN(len(live))
			c := live[i]
			live = slices.Delete(live, i, i+1)
			q.remove(c)
			c.state = out
			model[c.source] = slices.DeleteFunc(model[c.source], func(x *Conn) bool { return x == c })
		}
		most := 0
		for _, s := range sources {
			cs := model[s]
			if q.count(s) != len(cs) {
				t.Fatalf("step %d: %d of %v counted, %d there", step, q.count(s), s, len(cs))
			}
			var oldest, newest *Conn
			if len(cs) > 0 {
				oldest, newest = cs[0], cs[len(cs)-1]
			}
			if q.oldest(s) != oldest || q.newest(s) != newest {
				t.Fatalf("step %d: the oldest or newest of %v is not the first or last still there", step, s)
			}
			most = max(most, len(cs))
		}
		if s, n := q.busiest(); n != most || most > 0 && len(model[s]) != most {
			t.Fatalf("step %d: the busiest source %v holds %d, the most is %d", step, s, n, most)
		}
		if q.n != len(live) {
			t.Fatalf("step %d: %d counted, %d there", step, q.n, len(live))
		}
	}
}
