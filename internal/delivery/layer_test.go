package delivery

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// A process of the tests: a layer on its own connection to a real
// embedded NATS server, routing into a list.
type node struct {
	t     *testing.T
	id    string
	conn  *bus.Conn
	layer *Layer
	subs  map[string]*bus.Subscription

	mu     sync.Mutex
	got    []string // the payloads routed, in order
	lost   []string
	failed []string
	drops  map[wire.DropKind]int
	cancel context.CancelFunc
}

var testSubjects = jobenv.SubjectsOf("t")

func newNode(t *testing.T, srv *bus.Server, id string, retain time.Duration) *node {
	t.Helper()
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: id})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, id: id, conn: conn, subs: map[string]*bus.Subscription{}, drops: map[wire.DropKind]int{}}
	n.layer = New(Config{Self: id, Subjects: testSubjects, Retain: retain,
		Route: func(f *wire.Frame, subject string) {
			n.mu.Lock()
			n.got = append(n.got, string(f.Payload))
			n.mu.Unlock()
		},
		Lost: func(from, key, why string) {
			n.mu.Lock()
			n.lost = append(n.lost, fmt.Sprintf("%s %s: %s", from, key, why))
			n.mu.Unlock()
		},
		Drop: func(k wire.DropKind, subject string, err error) {
			n.mu.Lock()
			n.drops[k]++
			n.mu.Unlock()
		},
		Failed: func(f *wire.Frame, subject string, err error) {
			n.mu.Lock()
			n.failed = append(n.failed, err.Error())
			n.mu.Unlock()
		},
		MaxPayload: 1 << 30}, conn)
	n.subscribe(testSubjects.Proc(id))
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go conn.Run(ctx, n.layer.Receive)
	go n.layer.Run(ctx)
	t.Cleanup(func() { cancel(); conn.Close() })
	return n
}

func (n *node) subscribe(subject string) {
	s, err := n.conn.Subscribe(subject)
	if err != nil {
		n.t.Fatal(err)
	}
	n.subs[subject] = s
}

// send sends payload to d as a frame of the runtime's.
func (n *node) send(d Dest, payload string) {
	n.t.Helper()
	h := wire.Header{Kind: wire.KindActor, Target: "m", Method: "M", Rank: -1}
	w := wire.NewPayload(&h, 1<<30)
	if _, err := w.Enc.Writer().Write([]byte(payload)); err != nil {
		n.t.Fatal(err)
	}
	if err := n.layer.Send(w, &h, d); err != nil {
		n.t.Fatal(err)
	}
	w.Free()
}

func (n *node) routed() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func startServer(t *testing.T) *bus.Server {
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// TestInOrderAcrossSubjectsAndRuns: bursts (runs) and single frames, on a
// proc's subject and on a group's it shares with another receiver, reach
// each receiver once, in send order; the bursts travel as runs (far fewer
// NATS messages than frames).
func TestInOrderAcrossSubjectsAndRuns(t *testing.T) {
	srv := startServer(t)
	a, b, c := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0), newNode(t, srv, "c", 0)
	for _, r := range []*node{b, c} {
		r.layer.Subscribe(jobenv.MeshKey("g"))
		r.subscribe(testSubjects.Mesh("g"))
	}
	a.conn.Flush(context.Background())
	group := ToGroup(testSubjects, "g", []string{"b", "c"})
	var wantB, wantC []string
	published := 0
	counter, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "counter"})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close()
	var mu sync.Mutex
	if _, err := counter.Watch(">", func(bus.Message) { mu.Lock(); published++; mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	counter.Flush(context.Background())
	const n = 6000
	for i := range n {
		p := fmt.Sprint("m", i)
		switch {
		case i%1000 < 900: // a burst to the group
			a.send(group, p)
			wantB, wantC = append(wantB, p), append(wantC, p)
		case i%2 == 0:
			a.send(a.layer.ToProc("b"), p)
			wantB = append(wantB, p)
		default:
			a.send(a.layer.ToProc("c"), p)
			wantC = append(wantC, p)
		}
		if i%1000 == 999 {
			time.Sleep(time.Millisecond) // the burst ends
		}
	}
	waitFor(t, "every frame", func() bool { return len(b.routed()) >= len(wantB) && len(c.routed()) >= len(wantC) })
	if got := b.routed(); !slices.Equal(got, wantB) {
		t.Errorf("b routed %d frames, want %d; first difference at %d", len(got), len(wantB), firstDiff(got, wantB))
	}
	if got := c.routed(); !slices.Equal(got, wantC) {
		t.Errorf("c routed %d frames, want %d; first difference at %d", len(got), len(wantC), firstDiff(got, wantC))
	}
	mu.Lock()
	defer mu.Unlock()
	if published > n/2 {
		t.Errorf("%d frames took %d NATS messages: the bursts did not travel as runs", n, published)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestLossRepaired: while a receiver is not subscribed, what is sent to
// it is lost on the bus; the sender's tail markers and the receiver's
// NAKs find it and it arrives, once, in order, with nothing said lost.
func TestLossRepaired(t *testing.T) {
	srv := startServer(t)
	a, b := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0)
	to := a.layer.ToProc("b")
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprint("before ", i))
		a.send(to, want[len(want)-1])
	}
	waitFor(t, "the first frames", func() bool { return len(b.routed()) == 10 })
	inbox := testSubjects.Proc("b")
	b.subs[inbox].Unsubscribe()
	b.conn.Flush(context.Background())
	for i := range 50 {
		want = append(want, fmt.Sprint("lost ", i))
		a.send(to, want[len(want)-1])
	}
	a.conn.Flush(context.Background())
	b.subscribe(inbox)
	b.conn.Flush(context.Background())
	for i := range 5 {
		want = append(want, fmt.Sprint("after ", i))
		a.send(to, want[len(want)-1])
	}
	waitFor(t, "every frame", func() bool { return len(b.routed()) >= len(want) })
	if got := b.routed(); !slices.Equal(got, want) {
		t.Errorf("routed %v\nwant %v", got, want)
	}
	if len(b.lost) > 0 {
		t.Errorf("said lost: %v", b.lost)
	}
}

// TestLossPastTheHistory: what the sender no longer holds when asked is
// said lost (Config.Lost), and what came after it is routed.
func TestLossPastTheHistory(t *testing.T) {
	srv := startServer(t)
	a, b := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0)
	to := a.layer.ToProc("b")
	a.send(to, "first")
	waitFor(t, "the first frame", func() bool { return len(b.routed()) == 1 })
	inbox := testSubjects.Proc("b")
	b.subs[inbox].Unsubscribe()
	b.conn.Flush(context.Background())
	a.send(to, "lost")
	a.conn.Flush(context.Background())
	// What the sender kept ages out (its clock an hour on, once).
	a.layer.outMu.Lock()
	a.layer.out.Tick(time.Now().Add(time.Hour))
	a.layer.outMu.Unlock()
	b.subscribe(inbox)
	b.conn.Flush(context.Background())
	a.send(to, "after")
	waitFor(t, "the frame after the loss", func() bool { return len(b.routed()) == 2 })
	if got := b.routed(); !slices.Equal(got, []string{"first", "after"}) {
		t.Errorf("routed %v", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lost) != 1 {
		t.Errorf("said lost: %v; want one loss", b.lost)
	}
}
