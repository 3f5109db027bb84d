package bus_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/nats-io/nats.go"
)

// errLog keeps what a Conn reports to OnError.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) add(err error) { l.mu.Lock(); l.errs = append(l.errs, err); l.mu.Unlock() }

func (l *errLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// TestMalformedFromAPeer: a peer holding the job's token publishes a
// malformed message of every kind, twice, between good ones. The receiver
// hands on exactly the good ones in order, counts every drop, reports each
// kind once, and its connection stays healthy.
func TestMalformedFromAPeer(t *testing.T) {
	s := startServer(t, bus.ServerOptions{MaxPayload: 64 << 10})
	var reported errLog
	sub := dial(t, s, bus.ConnOptions{MaxMessage: 1 << 20, OnError: reported.add})
	if _, err := sub.Subscribe("in"); err != nil {
		t.Fatal(err)
	}
	sub.Flush(context.Background())
	got := collect(t, sub, 100)
	peer, err := nats.Connect(s.URL(), nats.Token(s.Token()))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	raw := rawConn(t, s)

	withHeader := func(key, value string, data []byte) *nats.Msg {
		return &nats.Msg{Subject: "in", Data: data, Header: nats.Header{key: []string{value}}}
	}
	bad := []struct {
		kind bus.DropKind
		send func() error
	}{
		{bus.DropBatch, func() error { return peer.PublishMsg(withHeader("Mon-Batch", "many", []byte("\x01a"))) }},
		{bus.DropBatch, func() error { return peer.PublishMsg(withHeader("Mon-Batch", "1000000", []byte("\x05ab"))) }},
		{bus.DropChunk, func() error { return peer.PublishMsg(withHeader("Mon-Chunk", "nonsense", []byte("x"))) }},
		// A part of 4 bytes claiming the largest message in two parts.
		{bus.DropChunk, func() error {
			return peer.PublishMsg(withHeader("Mon-Chunk", fmt.Sprintf("big 0 2 %d", 1<<20), []byte("tiny")))
		}},
		{bus.DropHeader, func() error { return peer.PublishMsg(withHeader("X-Stray", "1", []byte("stray"))) }},
		// Headers nats.go cannot decode: it passes the bytes on without
		// them (they arrive as a message, "!hdr", counted as a drop of
		// their headers).
		{bus.DropHeader, func() error { return raw.hpub("in", "NATS/1.0\r\nno colon here\r\n\r\n", "!hdr") }},
	}
	var want []string
	for i := 0; i < 2; i++ {
		for j, b := range bad {
			good := fmt.Sprintf("good %d.%d", i, j)
			want = append(want, good)
			if err := peer.Publish("in", []byte(good)); err != nil {
				t.Fatal(err)
			}
			if err := b.send(); err != nil {
				t.Fatal(err)
			}
		}
	}
	peer.Publish("in", []byte("last"))
	want = append(want, "last")
	peer.Flush()
	raw.flush(t)
	for _, w := range want {
		m := recv(t, got)
		for string(m.Data) == "!hdr" {
			m = recv(t, got)
		}
		if string(m.Data) != w {
			t.Fatalf("got %q, want %q", m.Data, w)
		}
	}
	counts := map[bus.DropKind]uint64{}
	for _, b := range bad {
		counts[b.kind] += 2
	}
	// nats.go reports headers it cannot decode from a goroutine of its
	// own: wait (bounded) for the counts.
	deadline := time.Now().Add(10 * time.Second)
	for _, k := range bus.DropKinds() {
		for sub.Dropped(k) < counts[k] && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := sub.Dropped(k); got != counts[k] {
			t.Errorf("Dropped(%s) = %d, want %d", k, got, counts[k])
		}
	}
	perKind := map[bus.DropKind]int{}
	for _, err := range reported.all() {
		var de *bus.DropError
		if !errors.As(err, &de) || !errors.Is(err, bus.ErrMalformed) {
			t.Errorf("reported %v, want only drops", err)
			continue
		}
		perKind[de.Kind]++
	}
	for k := range counts {
		if perKind[k] != 1 {
			t.Errorf("%d reports of %s drops, want 1", perKind[k], k)
		}
	}
	// The link is fine both ways.
	pub := dial(t, s, bus.ConnOptions{})
	if err := pub.Publish("in", make([]byte, 200<<10)); err != nil {
		t.Fatal(err)
	}
	m := recv(t, got)
	for string(m.Data) == "!hdr" {
		m = recv(t, got)
	}
	if len(m.Data) != 200<<10 {
		t.Fatalf("after the drops: got %d bytes", len(m.Data))
	}
}

// TestPublishChecksMaxMessageFirst: the limit holds for a message the
// server would take in one piece too, and nothing of it is sent.
func TestPublishChecksMaxMessageFirst(t *testing.T) {
	s := startServer(t, bus.ServerOptions{MaxPayload: 1 << 20})
	pub := dial(t, s, bus.ConnOptions{MaxMessage: 100 << 10})
	err := pub.Publish("x", make([]byte, 100<<10+1))
	if !errors.Is(err, bus.ErrTooLarge) || !strings.Contains(err.Error(), "limit 102400") {
		t.Fatalf("err = %v, want ErrTooLarge naming the limit", err)
	}
	if err := pub.Publish("x", make([]byte, 100<<10)); err != nil {
		t.Fatalf("a message at the limit: %v", err)
	}
}

// TestBadSubjectFailsInPublish: in a burst, small messages are batched and
// sent later; one for a subject NATS refuses must fail in Publish, not
// later in the flusher (where it would be a fault of the connection).
func TestBadSubjectFailsInPublish(t *testing.T) {
	s := startServer(t, bus.ServerOptions{})
	var reported errLog
	pub := dial(t, s, bus.ConnOptions{OnError: reported.add})
	for i := 0; i < 200; i++ {
		if err := pub.Publish("ok", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish("not ok", []byte("x")); err == nil {
			t.Fatal("Publish to a subject with a space succeeded")
		}
	}
	if err := pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := reported.all(); len(errs) != 0 {
		t.Fatalf("reported %v", errs)
	}
}

func TestMaxReassemblyBelowMaxMessageRefused(t *testing.T) {
	s := startServer(t, bus.ServerOptions{})
	if _, err := bus.Connect(s.URL(), bus.ConnOptions{Token: s.Token(), MaxMessage: 1 << 20, MaxReassembly: 1 << 19}); err == nil {
		t.Fatal("Connect with MaxReassembly < MaxMessage succeeded")
	}
}

// rawNATS speaks the NATS protocol itself, to send what nats.go would not.
type rawNATS struct {
	c net.Conn
	r *bufio.Reader
}

func rawConn(t *testing.T, s *bus.Server) *rawNATS {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	r := &rawNATS{c: c, r: bufio.NewReader(c)}
	if _, err := r.r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT {\"auth_token\":%q,\"headers\":true,\"verbose\":false,\"pedantic\":false}\r\n", s.Token())
	r.flush(t)
	return r
}

func (r *rawNATS) hpub(subject, hdr, payload string) error {
	_, err := fmt.Fprintf(r.c, "HPUB %s %d %d\r\n%s%s\r\n", subject, len(hdr), len(hdr)+len(payload), hdr, payload)
	return err
}

// flush waits for the server to have processed everything sent so far.
func (r *rawNATS) flush(t *testing.T) {
	t.Helper()
	fmt.Fprint(r.c, "PING\r\n")
	for {
		line, err := r.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "-ERR") {
			t.Fatalf("server: %s", line)
		}
		if line == "PONG\r\n" {
			return
		}
	}
}
