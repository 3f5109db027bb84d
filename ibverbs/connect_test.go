package ibverbs

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestConnect: streams opened to a buffer (Connect) reach the owner's
// Accept by their tag, in whatever order, over plain TCP and TLS, and
// carry bytes both ways; a second stream under a tag not yet taken
// replaces the first; Accept is bounded by ctx; a stream to a closed
// buffer, or to a key nobody owns, is refused with ErrClosed; closing the
// buffer closes the streams that wait and ends Accept.
func TestConnect(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			srv := startTestServer(t, serverLimits{idle: time.Minute, progress: time.Minute, conns: 64}, withTLS)
			b, h := testBuffer(t, 4096, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			c1, err := h.Connect(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer c1.Close()
			c2, err := h.Connect(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			a2, err := b.Accept(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer a2.Close()
			a1, err := b.Accept(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer a1.Close()
			roundTrip(t, c1, a1, "one")
			roundTrip(t, c2, a2, "two")

			// Replaced: the first stream under tag 3 ends, the second is
			// the one Accept gives.
			old, err := h.Connect(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			waitFor(t, "the first stream under tag 3 to park", func() bool {
				pk := b.parking()
				pk.mu.Lock()
				defer pk.mu.Unlock()
				return pk.conns[3] != nil
			})
			newer, err := h.Connect(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer newer.Close()
			// The answer comes before the stream parks: once the older
			// one ended, the newer waits.
			old.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := old.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				t.Fatalf("the replaced stream: read %v, want its end", err)
			}
			a3, err := b.Accept(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer a3.Close()
			roundTrip(t, newer, a3, "three")

			// Accept waits no longer than ctx.
			short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
			defer stop()
			if _, err := b.Accept(short, 4); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Accept of a tag nobody connects: %v", err)
			}

			// A stream that waits is closed with its buffer; Accept ends.
			waiting, err := h.Connect(ctx, 5)
			if err != nil {
				t.Fatal(err)
			}
			defer waiting.Close()
			waitFor(t, "the stream under tag 5 to park", func() bool {
				pk := b.parking()
				pk.mu.Lock()
				defer pk.mu.Unlock()
				return pk.conns[5] != nil
			})
			accepted := make(chan error, 1)
			go func() { _, err := b.Accept(ctx, 6); accepted <- err }()
			b.Close()
			if err := <-accepted; !errors.Is(err, ErrClosed) {
				t.Fatalf("Accept when the buffer closed: %v", err)
			}
			waiting.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := waiting.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("a waiting stream when its buffer closed: read %v, want EOF", err)
			}
			if _, err := h.Connect(ctx, 7); !errors.Is(err, ErrClosed) {
				t.Fatalf("Connect to a closed buffer: %v", err)
			}
			if _, err := b.Accept(ctx, 7); !errors.Is(err, ErrClosed) {
				t.Fatalf("Accept on a closed buffer: %v", err)
			}
			h.Key++
			if _, err := h.Connect(ctx, 1); !errors.Is(err, ErrClosed) {
				t.Fatalf("Connect to a key nobody owns: %v", err)
			}
		})
	}
}

// roundTrip sends msg from one end of a stream to the other and back.
func roundTrip(t *testing.T, a, b net.Conn, msg string) {
	t.Helper()
	for _, dir := range [][2]net.Conn{{a, b}, {b, a}} {
		if _, err := dir[0].Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		dir[1].SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(dir[1], got); err != nil || string(got) != msg {
			t.Fatalf("read %q, %v; want %q", got, err, msg)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestServeConnectBadInput: a connect request that carries a length, or
// bytes after it, is not this protocol: the server hangs up; one the
// buffer cannot take (maxParked streams wait already) is refused, and the
// connection goes on serving requests.
func TestServeConnectBadInput(t *testing.T) {
	srv := startTestServer(t, serverLimits{idle: time.Minute, progress: time.Minute, conns: 64}, false)
	b, h := testBuffer(t, 64, srv)
	for _, tc := range []struct {
		name string
		req  []byte
	}{
		{"a length", request(connectOp, h.Key, 1, 8, make([]byte, 8)...)},
		// After a first request: the second comes out of the server's
		// read buffer, which holds what followed it.
		{"bytes after", append(request('r', h.Key, 0, 8), append(request(connectOp, h.Key, 1, 0), 'r')...)},
	} {
		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(tc.req); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, c)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) || n > 9 {
			t.Errorf("%s: read %d bytes, %v; want the server to hang up", tc.name, n, err)
		}
		c.Close()
	}

	pk := b.parking()
	pk.mu.Lock()
	for i := range maxParked {
		pk.conns[uint64(1000+i)] = nil
	}
	pk.mu.Unlock()
	c, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(request(connectOp, h.Key, 1, 0)); err != nil {
		t.Fatal(err)
	}
	st := make([]byte, 1)
	if _, err := io.ReadFull(c, st); err != nil || statusErr(st[0]) != ErrRange {
		t.Fatalf("a connect past maxParked: status %v, %v", st, err)
	}
	if _, err := c.Write(request('r', h.Key, 0, 8)); err != nil {
		t.Fatal(err)
	}
	ans := make([]byte, 9)
	if _, err := io.ReadFull(c, ans); err != nil || ans[0] != statusOK {
		t.Fatalf("a read after the refusal: %v, %v", ans, err)
	}
	pk.mu.Lock()
	for i := range maxParked {
		delete(pk.conns, uint64(1000+i))
	}
	pk.mu.Unlock()
}
