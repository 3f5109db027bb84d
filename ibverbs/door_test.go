package ibverbs

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
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
// the server in its first request, whole within the door's bound, is
// closed at the bound, whatever its idle bound: one that sends nothing
// (not even a TLS hello), half a header, or (TLS) a handshake and
// nothing; one whose request names no buffer is answered so and closed.
// None of them is ever served.
func TestDoorClosesUnproven(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			srv := startTestServer(t, serverLimits{auth: time.Second, idle: time.Minute, progress: time.Minute}, withTLS)
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
			waitFor(t, "the door to empty", func() bool { return srv.door.pending() == 0 })
			if n := srv.admitted.Load(); n != 0 {
				t.Errorf("%d unproven connections were served", n)
			}
		})
	}
}

// TestDoorFloodDoesNotRefuse: connections that send nothing, 100 each
// from three addresses, one of them the client's, against a server that
// serves 8 at most: the client's transfers, each on a new connection, go
// through, while the server holds open no more of the flood than its
// door's bounds (16 in all, 8 a source).
func TestDoorFloodDoesNotRefuse(t *testing.T) {
	ctx := context.Background()
	limits := serverLimits{auth: time.Minute, idle: time.Minute, progress: time.Minute, conns: 8, pending: 16, perSource: 8}
	srv := startTestServer(t, limits, false)
	_, h := testBuffer(t, 1<<20, srv)
	var flood []net.Conn
	for range 100 {
		for _, src := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
			flood = append(flood, dialFrom(t, src, srv.addr))
		}
	}
	waitFor(t, "the server to take the whole flood", func() bool {
		return int(srv.door.displaced.Load())+srv.door.pending() == len(flood)
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
	if total > limits.pending {
		t.Errorf("the server holds %d connections of the flood open, its door %d", total, limits.pending)
	}
	for src, n := range open {
		if n > limits.perSource {
			t.Errorf("the server holds %d connections from %s open, its door %d a source", n, src, limits.perSource)
		}
	}
	t.Logf("flood connections still open: %v", open)
}

// TestDoorSpendsLittle: a connection that has not proved itself costs
// the server no read buffer: 400 of them, plain or TLS, take less than
// 16 KiB each of this process's heap and stacks (the client's sockets
// included), where a served connection's read buffer alone is 64 KiB.
func TestDoorSpendsLittle(t *testing.T) {
	const n = 400
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			srv := startTestServer(t, serverLimits{auth: time.Minute, pending: n, perSource: n}, withTLS)
			before := inUse()
			for range n {
				dialFrom(t, "127.0.0.1", srv.addr)
			}
			waitFor(t, "every connection at the door", func() bool { return srv.door.pending() == n })
			grew := int64(inUse()) - int64(before)
			t.Logf("%d connections at the door: %d bytes each", n, grew/n)
			if grew/n > 16<<10 {
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
