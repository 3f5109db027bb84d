package actorrt_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// cutProxy stands between procs and the bus: a test cuts it (every
// connection closed, new ones refused) for a while, as a link that drops.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.closeAll() })
	go p.serve()
	return p
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close(); c.Close() }()
		go func() { io.Copy(c, s); s.Close(); c.Close() }()
	}
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// cut drops every connection and refuses new ones for d.
func (p *cutProxy) cut(d time.Duration) {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.closeAll()
	time.AfterFunc(d, func() {
		p.mu.Lock()
		p.down = false
		p.mu.Unlock()
	})
}

// proxyChildBus puts a cut proxy between the client's bus and the procs
// spawned until restore is called.
func proxyChildBus(t *testing.T) (proxy *cutProxy, restore func()) {
	hub, restore := actorrt.SetChildBusURL(clientCtx, "")
	u, err := url.Parse(hub)
	if err != nil {
		t.Fatal(err)
	}
	proxy = newCutProxy(t, u.Host)
	actorrt.SetChildBusURL(clientCtx, proxy.url())
	return proxy, restore
}

// TestLinkCutLosesNothing: procs whose link to the bus is cut for 2s in
// the middle of traffic (broadcasts to the whole mesh and to slices, calls
// whose answers come back) reconnect, and every actor sees exactly the
// messages sent to it, once each, in send order; every call is answered.
func TestLinkCutLosesNothing(t *testing.T) {
	ctx := testCtx(t)
	proxy, restore := proxyChildBus(t)
	procs := spawnProcs(t, actorrt.Dims{{"procs", 2}})
	restore()
	rec, err := actorrt.SpawnPerProc[Recorder](ctx, procs, "cut", actorrt.Dims{{"actors", 2}})
	if err != nil {
		t.Fatal(err)
	}
	note, noteCall := actorrt.VoidMethod1((*Recorder).Note), actorrt.Method1((*Recorder).NoteCall)
	want := make([][]int64, 4)
	var calls []*actorrt.Future[actorrt.ValueMesh[int64]]
	start := time.Now()
	cutAt, cutFor := 700*time.Millisecond, 2*time.Second
	cut := false
	for i := int64(0); time.Since(start) < cutAt+cutFor+time.Second; i++ {
		if !cut && time.Since(start) > cutAt {
			proxy.cut(cutFor)
			cut = true
		}
		target, members := rec, []int{0, 1, 2, 3}
		switch i % 4 {
		case 1:
			target, members = rec.At("procs", 1), []int{2, 3}
		case 2:
			target, members = rec.At("procs", 0).At("actors", 1), []int{1}
		}
		for _, m := range members {
			want[m] = append(want[m], i)
		}
		if i%4 == 3 {
			calls = append(calls, noteCall.Call(target, i))
		} else if err := note.Broadcast(target, i); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		time.Sleep(time.Millisecond)
	}
	for _, c := range calls {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := c.Get(cctx)
		cancel()
		if err != nil {
			t.Fatalf("a call across the cut: %v", err)
		}
	}
	seen, err := actorrt.Method((*Recorder).Seen).Call(rec).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for r, s := range seen.Values() {
		total += len(s)
		if len(s) != len(want[r]) {
			t.Errorf("actor %d saw %d messages, want %d", r, len(s), len(want[r]))
			continue
		}
		for j := range s {
			if s[j] != want[r][j] {
				t.Errorf("actor %d: message %d is %d, want %d", r, j, s[j], want[r][j])
				break
			}
		}
	}
	t.Logf("%d deliveries across a 2s cut, %d calls answered", total, len(calls))
}

// TestLinkCutPastTheHostTimeout: a link down for longer than the host
// timeout is a failure: the procs behind it give up (their bus is gone),
// the calls waiting on them fail, their owner hears of it, and nothing
// is left running.
func TestLinkCutPastTheHostTimeout(t *testing.T) {
	ctx := testCtx(t)
	proxy, restore := proxyChildBus(t)
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"procs", 1}})
	restore()
	if err != nil {
		t.Fatal(err)
	}
	c := spawn[Crasher](t, procs, "cut-off")
	pid, err := actorrt.Method((*Crasher).PID).CallOne(c).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.cut(time.Minute)
	start := time.Now()
	_, err = actorrt.Method((*Crasher).Block).CallOne(c).Get(ctx)
	if !errors.Is(err, actorrt.ErrProcFailed) {
		t.Fatalf("a call waiting on a proc cut off for good: %v, want ErrProcFailed", err)
	}
	f := waitFailure(t, "cut-off")
	t.Logf("cut off: call failed after %v; failure: %s", time.Since(start).Round(time.Millisecond), f.Reason)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
	waitGone(t, []int{pid})
}
