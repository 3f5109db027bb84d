package ibverbs

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
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
			waitFor(t, "the door to empty", func() bool { n := srv.door.Counts(); return n.Held+n.Reading == 0 })
			if n := srv.admitted.Load(); n != 0 {
				t.Errorf("%d unproven connections were served", n)
			}
		})
	}
}

// TestDoorFloodDoesNotRefuse: 300 connections that send nothing and 50
// that send a byte and no more, from the client's own source (all of
// loopback is one), against a server that holds 16 and reads 8 of a
// source at most: the client's transfers, each on a new connection, go
// through, while the server holds open no more of the flood than its
// door's bounds.
func TestDoorFloodDoesNotRefuse(t *testing.T) {
	ctx := context.Background()
	limits := serverLimits{auth: time.Minute, hold: time.Minute, idle: time.Minute, progress: time.Minute, conns: 8, held: 16, pending: 16, perSource: 8}
	srv := startTestServer(t, limits, false)
	_, h := testBuffer(t, 1<<20, srv)
	var flood, bytes []net.Conn
	for i := range 300 {
		flood = append(flood, dialFrom(t, "127.0.0."+strconv.Itoa(1+i%3), srv.addr))
	}
	for range 50 {
		c := dialFrom(t, "127.0.0.1", srv.addr)
		if _, err := c.Write([]byte{'r'}); err != nil {
			t.Fatal(err)
		}
		bytes = append(bytes, c)
	}
	waitFor(t, "the server to take the whole flood", func() bool {
		n := srv.door.Counts()
		return n.Entered == uint64(len(flood)+len(bytes)) && int(n.Displaced)+n.Held+n.Reading == len(flood)+len(bytes)
	})
	be := newTCPBackend(clientLimits{keepIdle: 0, connect: connectBound, progress: clientProgressBound, redial: redialFor})
	got := make([]byte, 1<<20)
	for i := range 20 {
		if err := be.read(ctx, h, 0, got); err != nil {
			t.Fatalf("transfer %d under the flood: %v", i, err)
		}
	}
	open := 0
	for _, c := range flood {
		if openAtServer(c) {
			open++
		}
	}
	if open > limits.held {
		t.Errorf("the server holds %d silent connections open, its door %d", open, limits.held)
	}
	reading := 0
	for _, c := range bytes {
		if openAtServer(c) {
			reading++
		}
	}
	if reading > limits.perSource {
		t.Errorf("the server reads %d connections from one source, its door %d", reading, limits.perSource)
	}
	t.Logf("silent connections still open: %d; of those that sent a byte: %d", open, reading)
}
