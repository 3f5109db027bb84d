package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
)

// startFunnelLeaf starts a leaf of hub that delivers public.> to its own
// clients as local.>.
func startFunnelLeaf(t *testing.T, hub *bus.Server, public, local string) *bus.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := bus.StartLeaf(ctx, bus.Hub{URLs: []string{hub.LeafURL()}, Token: hub.Token(),
		Local: []bus.Funnel{{Public: public, Local: local}}}, bus.ServerOptions{Token: hub.Token()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Shutdown)
	return l
}

// TestFunnel: a leaf that funnels j.proc.a.> to j.local.a.> tells the hub
// of the subtree once, and of none of the subscriptions under j.local.a;
// a message for one of them arrives from another leaf and from the hub
// (sent right after the subscription, with no wait) and from a client of
// the same leaf, under the local subject; and what is delivered there
// does not leave the leaf.
func TestFunnel(t *testing.T) {
	hub := startHub(t, bus.ServerOptions{})
	a := startFunnelLeaf(t, hub, "j.proc.a", "j.local.a")
	b := startLeaf(t, hub.Token(), hub)
	// The leaves' own (j.proc.a.> among them), once the inbox each
	// used to probe its link at start is gone.
	base := settled(t, func() int { return hub.Interest("").OverLeaves })
	learned := settled(t, func() int { return b.Interest("").OverLeaves })

	// An eavesdropper on b that wants every local subject.
	spy := dial(t, b, bus.ConnOptions{})
	spied := collect(t, spy, 64)
	if _, err := spy.Subscribe("j.local.>"); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitCount(t, "subscriptions announced to the hub", base+1, func() int { return hub.Interest("").OverLeaves })

	const procs = 20
	conns := make([]*bus.Conn, procs)
	got := make([]<-chan bus.Message, procs)
	for i := range conns {
		conns[i] = dial(t, a, bus.ConnOptions{})
		got[i] = collect(t, conns[i], 64)
		if _, err := conns[i].Subscribe(fmt.Sprintf("j.local.a.p%d", i)); err != nil {
			t.Fatal(err)
		}
		if err := conns[i].Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// A leaf announces in the order its clients subscribe: once a
	// subscription made after all of them is at the hub, any of theirs
	// would be.
	if _, err := conns[0].Subscribe("j.other"); err != nil {
		t.Fatal(err)
	}
	waitCount(t, "subscriptions announced to the hub", base+2, func() int { return hub.Interest("").OverLeaves })
	waitCount(t, "subscriptions leaf b learned", learned+1, func() int { return b.Interest("").OverLeaves })

	// Subscribed and flushed: a message published now, once, arrives.
	fromB, fromHub := dial(t, b, bus.ConnOptions{}), dial(t, hub, bus.ConnOptions{})
	late := dial(t, a, bus.ConnOptions{})
	lateGot := collect(t, late, 4)
	if _, err := late.Subscribe("j.local.a.late"); err != nil {
		t.Fatal(err)
	}
	if err := late.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*bus.Conn{fromB, fromHub} {
		if err := c.Publish("j.proc.a.late", []byte("now")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if m := recv(t, lateGot); m.Subject != "j.local.a.late" || string(m.Data) != "now" {
			t.Fatalf("got %q on %s, want \"now\" on j.local.a.late", m.Data, m.Subject)
		}
	}

	for i, from := range []*bus.Conn{fromB, fromHub, conns[(3+1)%procs]} {
		if err := from.Publish("j.proc.a.p3", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if err := from.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		m := recv(t, got[3])
		if m.Subject != "j.local.a.p3" || len(m.Data) != 1 || m.Data[0] != byte(i) {
			t.Fatalf("sender %d: got %v on %s, want [%d] on j.local.a.p3", i, m.Data, m.Subject, i)
		}
	}
	// A message for a subject nobody on a wants is dropped there; none
	// of it reached the spy.
	fromB.Publish("j.proc.a.nobody", nil)
	fromB.Flush(context.Background())
	select {
	case m := <-spied:
		t.Fatalf("the spy on leaf b got %s", m.Subject)
	case <-time.After(200 * time.Millisecond):
	}
	for i, ch := range got {
		select {
		case m := <-ch:
			t.Fatalf("p%d got a message on %s", i, m.Subject)
		default:
		}
	}
}

// settled returns n() once it has not changed for 300 ms (within 10 s).
func settled(t *testing.T, n func() int) int {
	t.Helper()
	v, since := n(), time.Now()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if w := n(); w != v {
			v, since = w, time.Now()
		} else if time.Since(since) >= 300*time.Millisecond {
			return v
		}
	}
	t.Fatalf("a count still changing after 10s: %d", v)
	return 0
}

// TestFunnelBadOptions: a funnel names two distinct plain subjects.
func TestFunnelBadOptions(t *testing.T) {
	hub := startHub(t, bus.ServerOptions{})
	for _, f := range []bus.Funnel{{"", "l"}, {"p", ""}, {"p.*", "l"}, {"p", "l.>"}, {"p..q", "l"}, {"p", "p"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := bus.StartLeaf(ctx, bus.Hub{URLs: []string{hub.LeafURL()}, Token: hub.Token(), Local: []bus.Funnel{f}}, bus.ServerOptions{Token: hub.Token()})
		cancel()
		if err == nil {
			l.Shutdown()
			t.Errorf("funnel %q to %q accepted", f.Public, f.Local)
		}
	}
}
