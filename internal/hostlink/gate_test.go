package hostlink

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// openAtServer tells whether the watcher still holds c open: a read finds
// it closed (EOF, reset) or waits.
func openAtServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
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

// TestHoldsIdlePeers: over loopback (one source), four times as many
// peers as a source may have in handshake, that send nothing, are all
// held, none reset and none read, and an agent is admitted at its first
// try past them (before the door, those past the source's bound were
// reset, and so was the agent). A peer that sends part of its greeting
// and no more is read, never answered, and closed helloWait after.
func TestHoldsIdlePeers(t *testing.T) {
	w, events := startWatcher(t, WatcherOptions{})
	var idle []net.Conn
	for range 4 * maxPendingPerSource {
		c, err := net.Dial("tcp", addrOf(w))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		idle = append(idle, c)
	}
	waitFor(t, "every idle peer held", func() bool { return w.door.Counts().Held == len(idle) })
	c, _, err := dialOnce(context.Background(), DialOptions{Addr: addrOf(w), Agent: "h1", Token: "secret", Timeout: DefaultTimeout})
	if err != nil {
		t.Fatalf("the agent's first try past %d idle peers: %v", len(idle), err)
	}
	defer c.Close()
	if e := next(t, events, 5*time.Second); !e.Up || e.Agent != "h1" {
		t.Fatalf("%+v", e)
	}
	for i, c := range idle {
		if !openAtServer(c) {
			t.Fatalf("idle peer %d was dropped", i)
		}
	}
	if n := w.door.Counts(); n.Held != len(idle) || n.Reading != 0 || n.Displaced != 0 {
		t.Fatalf("door %+v", n)
	}

	slow, err := net.Dial("tcp", addrOf(w))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start := time.Now()
	if _, err := io.WriteString(slow, greeting[:3]); err != nil {
		t.Fatal(err)
	}
	slow.SetReadDeadline(time.Now().Add(4 * helloWait))
	if n, err := io.Copy(io.Discard, slow); n != 0 || err != nil {
		t.Fatalf("a peer that sent part of its greeting got %d bytes, then %v", n, err)
	}
	if took := time.Since(start); took < helloWait-100*time.Millisecond {
		t.Fatalf("a slow peer was dropped after %v, before helloWait", took)
	}
	none(t, events, 200*time.Millisecond)
}

// TestDecodes: MUNGE decodes go one per source, maxDecodes in all; a
// proof that finds no turn within its wait is told busy, one whose
// source was penalized meanwhile is told so, and a source is forgotten
// once none of its proofs waits.
func TestDecodes(t *testing.T) {
	d := newDecodes()
	no := func() bool { return false }
	soon := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	source := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32) }
	first, err := d.take(soon(), source(1), no)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.take(soon(), source(1), no); !errors.Is(err, errBusy) {
		t.Fatalf("a second decode of a source: %v, want busy", err)
	}
	var rest []func()
	for i := 2; i <= maxDecodes; i++ {
		r, err := d.take(soon(), source(i), no)
		if err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
		rest = append(rest, r)
	}
	if _, err := d.take(soon(), source(99), no); !errors.Is(err, errBusy) {
		t.Fatalf("a decode past maxDecodes: %v, want busy", err)
	}
	first()
	if _, err := d.take(soon(), source(1), func() bool { return true }); !errors.Is(err, errPenalized) {
		t.Fatalf("a decode of a penalized source: %v", err)
	}
	r, err := d.take(soon(), source(1), no)
	if err != nil {
		t.Fatalf("source 1's turn again: %v", err)
	}
	r()
	for _, r := range rest {
		r()
	}
	if n := d.sources(); n != 0 {
		t.Fatalf("%d sources remembered with no proof waiting", n)
	}
}
