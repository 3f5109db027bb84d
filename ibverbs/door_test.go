package ibverbs

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// The door of the buffer server, on real loopback sockets: a connection
// proves itself with its first request before anything is spent on it,
// and a flood of connections that do not cannot keep the job's own out.

// dialFrom connects to addr from the loopback address src (127.0.0.x: a
// source of its own), closed when the test ends.
func dialFrom(t testing.TB, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openAtServer tells whether the server still holds c open: a read finds
// it closed (EOF, reset) or waits.
func openAtServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// TestDoorClosesUnproven: a connection that does not name a buffer of
// the server in its first request is closed, whatever its idle bound:
// one that sends nothing (not even a TLS hello) once the door held it
// long enough, one that sends half a header, or (TLS) a handshake and
// nothing, at the door's bound; one whose request names no buffer is
// answered so and closed. None of them is ever served.
func TestDoorClosesUnproven(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			srv := startTestServer(t, serverLimits{auth: time.Second, hold: time.Second, idle: time.Minute, progress: time.Minute}, withTLS)
			_, h := testBuffer(t, 64, srv)
			silent := dialFrom(t, "127.0.0.1", srv.addr)
			if n := readsToEnd(t, silent); n != 0 {
				t.Errorf("a peer that sent nothing got %d bytes", n)
			}
			half := dialServer(t, srv)
			if _, err := half.Write(request('r', h.Key, 0, 8)[:12]); err != nil {
				t.Fatal(err)
			}
			if n := readsToEnd(t, half); n != 0 {
				t.Errorf("a peer that sent half a header got %d bytes", n)
			}
			if withTLS {
				hello := dialServer(t, srv) // the handshake, then nothing
				if n := readsToEnd(t, hello); n != 0 {
					t.Errorf("a peer that sent only its TLS handshake got %d bytes", n)
				}
			}
			stranger := dialServer(t, srv)
			if _, err := stranger.Write(request('r', h.Key+1, 0, 8)); err != nil {
				t.Fatal(err)
			}
			stranger.SetReadDeadline(time.Now().Add(20 * time.Second))
			got, err := io.ReadAll(stranger)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) || string(got) != string([]byte{statusNoSuch}) {
				t.Errorf("a request naming no buffer: answered %v, then %v; want [%d] and the end", got, err, statusNoSuch)
			}
			waitFor(t, "the door to empty", func() bool { held, reading := srv.door.waitingNow(); return held+reading == 0 })
			if n := srv.admitted.Load(); n != 0 {
				t.Errorf("%d unproven connections were served", n)
			}
		})
	}
}

// TestDoorFloodDoesNotRefuse: connections that send nothing, 100 each
// from three addresses, one of them the client's, and 50 from the
// client's that send a byte and no more, against a server that serves 8
// at most: the client's transfers, each on a new connection, go through,
// while the server holds open no more of the flood than its door's
// bounds (16 held, the busiest source giving way; 8 reading a source).
func TestDoorFloodDoesNotRefuse(t *testing.T) {
	ctx := context.Background()
	limits := serverLimits{auth: time.Minute, hold: time.Minute, idle: time.Minute, progress: time.Minute, conns: 8, held: 16, pending: 16, perSource: 8}
	srv := startTestServer(t, limits, false)
	_, h := testBuffer(t, 1<<20, srv)
	var flood, bytes []net.Conn
	for range 100 {
		for _, src := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
			flood = append(flood, dialFrom(t, src, srv.addr))
		}
	}
	for range 50 {
		c := dialFrom(t, "127.0.0.1", srv.addr)
		if _, err := c.Write([]byte{'r'}); err != nil {
			t.Fatal(err)
		}
		bytes = append(bytes, c)
	}
	waitFor(t, "the server to take the whole flood", func() bool {
		held, reading := srv.door.waitingNow()
		return int(srv.door.displaced.Load())+held+reading == len(flood)+len(bytes)
	})
	be := newTCPBackend(clientLimits{keepIdle: 0, connect: connectBound, progress: clientProgressBound, redial: redialFor})
	got := make([]byte, 1<<20)
	for i := range 20 {
		if err := be.read(ctx, h, 0, got); err != nil {
			t.Fatalf("transfer %d under the flood: %v", i, err)
		}
	}
	open, total := map[string]int{}, 0
	for _, c := range flood {
		if openAtServer(c) {
			open[c.LocalAddr().(*net.TCPAddr).IP.String()]++
			total++
		}
	}
	if total > limits.held {
		t.Errorf("the server holds %d silent connections open, its door %d", total, limits.held)
	}
	for src, n := range open {
		if n > limits.held/2 {
			t.Errorf("the server holds %d silent connections from %s open of %d, with two other sources", n, src, limits.held)
		}
	}
	reading := 0
	for _, c := range bytes {
		if openAtServer(c) {
			reading++
		}
	}
	if reading > limits.perSource {
		t.Errorf("the server reads %d connections from one address, its door %d", reading, limits.perSource)
	}
	t.Logf("silent connections still open: %v; of those that sent a byte: %d", open, reading)
}

// TestDoorSpendsLittle: a connection that has not proved itself costs
// the server no goroutine and no read buffer: 400 of them, plain or TLS,
// take less than 4 KiB each of this process's heap and stacks (the
// client's sockets included), where a served connection's read buffer
// alone is 64 KiB.
func TestDoorSpendsLittle(t *testing.T) {
	const n = 400
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			srv := startTestServer(t, serverLimits{auth: time.Minute, hold: time.Minute, held: n}, withTLS)
			before := inUse()
			for range n {
				dialFrom(t, "127.0.0.1", srv.addr)
			}
			waitFor(t, "every connection at the door", func() bool { held, _ := srv.door.waitingNow(); return held == n })
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

// TestDoorQueues: the door's queues, which take a connection out without
// walking its source's list, agree with plain lists through pushes and
// removals in any order: each source's oldest, its count, the busiest
// source's oldest, the total.
func TestDoorQueues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := queues{state: held}
	model := map[string][]*waiting{}
	var live []*waiting
	sources := []string{"a", "b", "c"}
	for step := range 20000 {
		if len(live) == 0 || rng.IntN(3) > 0 {
			w := &waiting{source: sources[rng.IntN(len(sources))], state: held}
			q.push(w)
			model[w.source] = append(model[w.source], w)
			live = append(live, w)
		} else {
			i := rng.IntN(len(live))
			w := live[i]
			live = slices.Delete(live, i, i+1)
			q.remove(w)
			w.state = out
			model[w.source] = slices.DeleteFunc(model[w.source], func(x *waiting) bool { return x == w })
		}
		most, busiest := 0, []string(nil)
		for _, s := range sources {
			ws := model[s]
			if q.count(s) != len(ws) {
				t.Fatalf("step %d: %d of %s counted, %d there", step, q.count(s), s, len(ws))
			}
			var want *waiting
			if len(ws) > 0 {
				want = ws[0]
			}
			if got := q.oldest(s); got != want {
				t.Fatalf("step %d: the oldest of %s is not the first still there", step, s)
			}
			switch {
			case len(ws) > most:
				most, busiest = len(ws), []string{s}
			case len(ws) == most && most > 0:
				busiest = append(busiest, s)
			}
		}
		if got := q.oldest(""); most > 0 && (got == nil || !slices.Contains(busiest, got.source) || got != model[got.source][0]) {
			t.Fatalf("step %d: the oldest of the busiest source is not it", step)
		}
		if q.n != len(live) {
			t.Fatalf("step %d: %d counted, %d there", step, q.n, len(live))
		}
	}
}
