package ibverbs

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The buffer server's limits, on real loopback sockets, with bounds
// shortened for the test: what the server cuts off and when, and that a
// client does not notice the server closing its idle connections. The
// waits are generous: they check that a disconnect happens, not how fast.

// startTestServer serves this process's buffers on a loopback port of its
// own, under limits (with TLS if withTLS), until the test ends.
func startTestServer(t *testing.T, limits serverLimits, withTLS bool) *tcpServer {
	t.Helper()
	srv, _ := startTestServerOn(t, limits, withTLS)
	return srv
}

// startTestServerOn is startTestServer, also returning the listener of
// the server's TCP connections, under TLS if any.
func startTestServerOn(t *testing.T, limits serverLimits, withTLS bool) (*tcpServer, *recordingListener) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingListener{Listener: tcp}
	var ln net.Listener = rec
	var pin string
	if withTLS {
		cert, sum, err := selfSigned()
		if err != nil {
			t.Fatal(err)
		}
		ln, pin = tls.NewListener(ln, serverTLS(cert)), sum
	}
	t.Cleanup(func() { ln.Close() })
	srv, err := thisProcess().startServer(ln, pin, limits.orDefaults())
	if err != nil {
		t.Fatal(err)
	}
	return srv, rec
}

// orDefaults is l with the bounds it leaves zero at their defaults.
func (l serverLimits) orDefaults() serverLimits {
	d := defaultServerLimits
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&l.auth, d.auth}, {&l.hold, d.hold}, {&l.idle, d.idle}, {&l.progress, d.progress}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct{ v, def *int }{{&l.conns, &d.conns}, {&l.held, &d.held}, {&l.pending, &d.pending}, {&l.perSource, &d.perSource}} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return l
}

// recordingListener keeps the connections it accepted, so that a test
// can make their server's idle deadline pass now.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// expire makes the deadline of every accepted connection pass now: to a
// server waiting for a request on it, as its idle bound passing would.
func (l *recordingListener) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.SetDeadline(time.Now())
	}
}

// testBuffer is a buffer of size bytes holding pattern bytes, and its
// handle pointed at srv.
func testBuffer(t *testing.T, size int, srv *tcpServer) (*Buffer, Handle) {
	t.Helper()
	b, err := NewBuffer(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for i := range b.mem {
		b.mem[i] = byte(i * 7)
	}
	h := b.Handle()
	h.Addr, h.TLS = srv.addr, srv.pin
	return b, h
}

// request is a request's bytes on the wire.
func request(op byte, key, off, n uint64, tail ...byte) []byte {
	b := make([]byte, headerLen)
	b[0] = op
	binary.LittleEndian.PutUint64(b[1:], key)
	binary.LittleEndian.PutUint64(b[9:], off)
	binary.LittleEndian.PutUint64(b[17:], n)
	return append(b, tail...)
}

// waitFor waits (20s at most, looking every 10ms) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, still waiting for %s", what)
		}
	}
}

// serving is how many connections srv serves now.
func serving(srv *tcpServer) int { return len(srv.served) }

// dialServer connects to srv, closed when the test ends.
func dialServer(t *testing.T, srv *tcpServer) net.Conn {
	t.Helper()
	c, err := dialOwner(context.Background(), srv.addr, srv.pin, connectBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readsToEnd reads c until it ends, 20s at most, and returns how many
// bytes came; the end must be the server's close, not the wait's.
func readsToEnd(t *testing.T, c net.Conn) int64 {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after %d bytes, the connection did not end: %v", n, err)
	}
	return n
}

// TestServerClosesIdleConns: a connection on which no request starts
// within the idle bound after its last one was answered is closed by the
// server.
func TestServerClosesIdleConns(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			srv := startTestServer(t, serverLimits{idle: time.Second, progress: time.Minute, conns: 8}, withTLS)
			_, h := testBuffer(t, 64, srv)
			done := dialServer(t, srv)
			if err := exchange(done, h, 0, make([]byte, 8), false); err != nil {
				t.Fatal(err)
			}
			if n := readsToEnd(t, done); n != 0 {
				t.Errorf("after its answer, an idle peer got %d more bytes", n)
			}
			waitFor(t, "the server to let the connection go", func() bool { return serving(srv) == 0 })
		})
	}
}

// TestServerCutsOffStalledRequests: a request that stops moving, in its
// body or in taking its answer, is cut off by the server within the
// progress bound, though the idle bound is long. (One that stops in its
// first header is the door's: TestDoorClosesUnproven.)
func TestServerCutsOffStalledRequests(t *testing.T) {
	const size = 32 << 20 // more than loopback's socket buffers hold
	srv := startTestServer(t, serverLimits{idle: time.Minute, progress: 200 * time.Millisecond, conns: 8}, false)
	_, h := testBuffer(t, size, srv)
	for _, tt := range []struct {
		name string
		send []byte
	}{
		{name: "half a second header", send: append(request('r', h.Key, 0, 8), request('r', h.Key, 0, 8)[:12]...)},
		{name: "half a write's body", send: request('w', h.Key, 0, 64, make([]byte, 32)...)},
		{name: "half an atomic's operands", send: request(byte(opFetchAdd), h.Key, 0, 16, 1, 0, 0)},
		{name: "a read's answer never taken", send: request('r', h.Key, 0, size)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialServer(t, srv)
			// A small window: the server cannot put the whole answer in
			// flight.
			c.(*net.TCPConn).SetReadBuffer(64 << 10)
			before := srv.admitted.Load()
			if _, err := c.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the server to take the request, then cut it off", func() bool {
				return srv.admitted.Load() == before+1 && serving(srv) == 0
			})
			if n := readsToEnd(t, c); n >= 1+size {
				t.Errorf("the whole answer came (%d bytes)", n)
			}
		})
	}
}

// TestServerConnBound: past the bound, a new connection is closed at once
// (and counted) while those served keep working; once one of them ends, a
// new one is served again.
func TestServerConnBound(t *testing.T) {
	const bound = 3
	srv := startTestServer(t, serverLimits{idle: time.Minute, progress: time.Minute, conns: bound}, false)
	_, h := testBuffer(t, 64, srv)
	works := func(c net.Conn) error { return exchange(c, h, 0, make([]byte, 8), false) }

	var held []net.Conn
	for range bound {
		c := dialServer(t, srv)
		if err := works(c); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	over := dialServer(t, srv)
	if err := works(over); !errors.Is(err, errHungUp) {
		t.Fatalf("a connection past the bound: %v, want it closed before an answer", err)
	}
	if got := srv.refused.Load(); got != 1 {
		t.Errorf("refused %d connections, want 1", got)
	}
	for i, c := range held {
		if err := works(c); err != nil {
			t.Fatalf("connection %d, served before the bound was reached: %v", i, err)
		}
	}

	held[0].Close()
	waitFor(t, "a new connection to be served", func() bool {
		c := dialServer(t, srv)
		return works(c) == nil
	})
}

// TestClientAcrossIdleClose: a client whose idle connection the server
// closed for idleness does not notice: each operation on the backend, the
// first after the close, succeeds, over plain TCP and TLS, and an atomic
// is applied once.
func TestClientAcrossIdleClose(t *testing.T) {
	const size = 32 << 20 // cut into parallel streams
	ctx := context.Background()
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			// The server's idle bound passes when the test says
			// (expire), not with time: on a starved machine a bound short
			// enough to wait for could also close a new connection before
			// its first request.
			srv, ln := startTestServerOn(t, serverLimits{idle: time.Minute, progress: time.Minute, conns: 64}, withTLS)
			b, h := testBuffer(t, size, srv)
			be := newTCPBackend(defaultClientLimits)
			t.Cleanup(func() { be.dropIdle(connKey(h.Addr, h.TLS)) })
			word := func(off int) uint64 { return binary.LittleEndian.Uint64(b.mem[off:]) }

			for _, op := range []struct {
				name string
				do   func() error
			}{
				{name: "read", do: func() error {
					got := make([]byte, 64)
					if err := be.read(ctx, h, 100, got); err != nil {
						return err
					}
					if !bytes.Equal(got, b.mem[100:164]) {
						return errors.New("read other bytes")
					}
					return nil
				}},
				{name: "write", do: func() error {
					return be.write(ctx, h, 200, []byte("written"))
				}},
				{name: "fetch-and-add", do: func() error {
					before := word(8)
					old, err := be.atomic(ctx, h, 8, opFetchAdd, 1, 0)
					if err == nil && (old != before || word(8) != before+1) {
						err = errors.New("not applied exactly once")
					}
					return err
				}},
				{name: "compare-and-swap", do: func() error {
					before := word(16)
					old, err := be.atomic(ctx, h, 16, opCAS, before, before+1)
					if err == nil && (old != before || word(16) != before+1) {
						err = errors.New("not applied exactly once")
					}
					return err
				}},
				{name: "read on parallel streams", do: func() error {
					got := make([]byte, size)
					if err := be.read(ctx, h, 0, got); err != nil {
						return err
					}
					if !bytes.Equal(got, b.mem) {
						return errors.New("read other bytes")
					}
					return nil
				}},
			} {
				t.Run(op.name, func(t *testing.T) {
					if err := op.do(); err != nil {
						t.Fatalf("before the close: %v", err)
					}
					// Again until all are gone: the server may not yet
					// have set the idle deadline after its last answer.
					waitFor(t, "the server to close the idle connections", func() bool {
						ln.expire()
						return serving(srv) == 0
					})
					if err := op.do(); err != nil {
						t.Fatalf("after the server closed the idle connection: %v", err)
					}
				})
			}
			if got := string(b.mem[200:207]); got != "written" {
				t.Errorf("the write left %q", got)
			}
		})
	}
}

// TestClientDropsStaleIdleConns: a connection idle for the client's bound
// is closed, not used, and a new one carries the request.
func TestClientDropsStaleIdleConns(t *testing.T) {
	ctx := context.Background()
	srv := startTestServer(t, serverLimits{idle: time.Minute, progress: time.Minute, conns: 8}, false)
	_, h := testBuffer(t, 64, srv)
	be := newTCPBackend(defaultClientLimits)
	k := connKey(h.Addr, h.TLS)
	t.Cleanup(func() { be.dropIdle(k) })
	if err := be.read(ctx, h, 0, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	be.mu.Lock()
	stale := be.idle[k][0].Conn
	be.idle[k][0].since = time.Now().Add(-clientIdleBound)
	be.mu.Unlock()

	if err := be.read(ctx, h, 0, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	be.mu.Lock()
	kept := be.idle[k]
	be.mu.Unlock()
	if len(kept) != 1 {
		t.Fatalf("kept %d idle connections, want the new one only", len(kept))
	}
	if kept[0].Conn == stale {
		t.Fatal("the stale connection was used again")
	}
	waitFor(t, "the server to see the stale connection closed", func() bool { return serving(srv) == 1 })
}
