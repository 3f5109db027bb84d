package bus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
)

func startServer(t *testing.T, o bus.ServerOptions) *bus.Server {
	t.Helper()
	s, err := bus.StartServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func dial(t *testing.T, s *bus.Server, o bus.ConnOptions) *bus.Conn {
	t.Helper()
	o.Token = s.Token()
	c, err := bus.Connect(s.URL(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// collect runs c and sends every message to the returned channel.
func collect(t *testing.T, c *bus.Conn, n int) <-chan bus.Message {
	t.Helper()
	out := make(chan bus.Message, n)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, func(m bus.Message) { out <- m }) }()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

func recv(t *testing.T, ch <-chan bus.Message) bus.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
		return bus.Message{}
	}
}

func TestServerDefaultsLoopbackAndToken(t *testing.T) {
	s := startServer(t, bus.ServerOptions{})
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") {
		t.Fatalf("URL = %q, want loopback", s.URL())
	}
	if len(s.Token()) < 20 {
		t.Fatalf("token %q too short", s.Token())
	}
	if _, err := bus.Connect(s.URL(), bus.ConnOptions{Token: "wrong"}); err == nil {
		t.Fatal("connect with a wrong token succeeded")
	}
	if _, err := bus.Connect(s.URL(), bus.ConnOptions{}); err == nil {
		t.Fatal("connect without a token succeeded")
	}
}

func TestServerBadOptions(t *testing.T) {
	for _, o := range []bus.ServerOptions{
		{MaxPayload: 10},
		{MaxPayload: 1 << 30},
		{Port: 70000},
		{MaxPayload: 2 << 20, MaxPending: 1 << 20},
	} {
		if s, err := bus.StartServer(o); err == nil {
			s.Shutdown()
			t.Errorf("StartServer(%+v) succeeded", o)
		}
	}
}

// TestOrderAcrossSubscriptions checks the promise of the package doc: one
// publisher's messages arrive in publish order across every subject the
// receiver is subscribed to.
func TestOrderAcrossSubscriptions(t *testing.T) {
	s := startServer(t, bus.ServerOptions{})
	pub, err := bus.ConnectInProcess(s, bus.ConnOptions{Name: "pub"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sub := dial(t, s, bus.ConnOptions{Name: "sub"})
	subjects := []string{"t.a", "t.b", "t.c"}
	for _, subj := range subjects {
		if _, err := sub.Subscribe(subj); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	const n = 30000
	got := collect(t, sub, n)
	for i := 0; i < n; i++ {
		if err := pub.Publish(subjects[i%3], []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		m := recv(t, got)
		if string(m.Data) != fmt.Sprint(i) || m.Subject != subjects[i%3] {
			t.Fatalf("message %d: got %q on %s", i, m.Data, m.Subject)
		}
	}
}

func TestOversizeMessageIsChunked(t *testing.T) {
	s := startServer(t, bus.ServerOptions{MaxPayload: 64 << 10})
	pub := dial(t, s, bus.ConnOptions{})
	sub := dial(t, s, bus.ConnOptions{})
	if _, err := sub.Subscribe("big"); err != nil {
		t.Fatal(err)
	}
	sub.Flush(context.Background())
	got := collect(t, sub, 4)

	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<10) // 320 KiB: 6 chunks
	big[len(big)-1] = 'Z'
	for _, msg := range [][]byte{[]byte("before"), big, []byte("after")} {
		if err := pub.Publish("big", msg); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range [][]byte{[]byte("before"), big, []byte("after")} {
		if m := recv(t, got); !bytes.Equal(m.Data, want) {
			t.Fatalf("got %d bytes, want %d", len(m.Data), len(want))
		}
	}
}

// TestPublishParts sends messages given in parts, of every size (batched,
// whole, chunked with chunks that span parts), among plain ones: each
// arrives as its parts joined, in order.
func TestPublishParts(t *testing.T) {
	s := startServer(t, bus.ServerOptions{MaxPayload: 64 << 10})
	pub := dial(t, s, bus.ConnOptions{})
	sub := dial(t, s, bus.ConnOptions{})
	if _, err := sub.Subscribe("parts"); err != nil {
		t.Fatal(err)
	}
	sub.Flush(context.Background())
	msgs := [][][]byte{
		{[]byte("plain")},
		{[]byte("sm"), nil, []byte("all")},
		{bytes.Repeat([]byte{'a'}, 3000), bytes.Repeat([]byte{'b'}, 3000)},
		{[]byte("head"), bytes.Repeat([]byte("0123456789"), 30000), []byte("tail")},
		{bytes.Repeat([]byte{'x'}, 65<<10), bytes.Repeat([]byte{'y'}, 1), bytes.Repeat([]byte{'z'}, 200<<10)},
		{[]byte("after")},
	}
	got := collect(t, sub, 2*len(msgs))
	for range 2 { // the second time in a burst
		for _, parts := range msgs {
			if err := pub.PublishParts("parts", parts); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 {
		for i, parts := range msgs {
			if m := recv(t, got); !bytes.Equal(m.Data, bytes.Join(parts, nil)) {
				t.Fatalf("message %d: got %d bytes, want %d", i, len(m.Data), len(bytes.Join(parts, nil)))
			}
		}
	}
}

func TestTooLargeRefused(t *testing.T) {
	s := startServer(t, bus.ServerOptions{MaxPayload: 64 << 10})
	pub := dial(t, s, bus.ConnOptions{MaxMessage: 1 << 20})
	err := pub.Publish("x", make([]byte, 2<<20))
	if !errors.Is(err, bus.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestSlowConsumerReported(t *testing.T) {
	s := startServer(t, bus.ServerOptions{})
	pub := dial(t, s, bus.ConnOptions{})
	errs := make(chan error, 16)
	sub := dial(t, s, bus.ConnOptions{QueueLen: 4, OnError: func(err error) {
		select {
		case errs <- err:
		default:
		}
	}})
	if _, err := sub.Subscribe("slow"); err != nil {
		t.Fatal(err)
	}
	sub.Flush(context.Background())
	// Nobody runs sub: its queue of 4 fills and the rest are dropped.
	// (Messages over 4 KiB, so that they are not batched.)
	for i := 0; i < 100; i++ {
		pub.Publish("slow", make([]byte, 5<<10))
	}
	pub.Flush(context.Background())
	select {
	case err := <-errs:
		if !errors.Is(err, bus.ErrSlowConsumer) {
			t.Fatalf("err = %v, want ErrSlowConsumer", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no slow-consumer report within 10s")
	}
}

func TestLostLinkEndsRun(t *testing.T) {
	s := startServer(t, bus.ServerOptions{})
	var mu sync.Mutex
	var reported []error
	c := dial(t, s, bus.ConnOptions{OnError: func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }})
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), func(bus.Message) {}) }()
	s.Shutdown()
	select {
	case err := <-done:
		if !errors.Is(err, bus.ErrClosed) {
			t.Fatalf("Run = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end within 10s of the server going away")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) == 0 {
		t.Fatal("lost link was not reported to OnError")
	}
	if err := c.Publish("x", []byte("y")); !errors.Is(err, bus.ErrClosed) {
		t.Fatalf("Publish after loss = %v, want ErrClosed", err)
	}
}

// TestBurstsKeepOrder publishes a burst that mixes small messages (which
// are batched), medium ones (which are not), chunked ones and subjects:
// everything arrives once, in order.
func TestBurstsKeepOrder(t *testing.T) {
	s := startServer(t, bus.ServerOptions{MaxPayload: 64 << 10})
	pub, err := bus.ConnectInProcess(s, bus.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sub := dial(t, s, bus.ConnOptions{})
	for _, subj := range []string{"b.x", "b.y"} {
		if _, err := sub.Subscribe(subj); err != nil {
			t.Fatal(err)
		}
	}
	sub.Flush(context.Background())
	const n = 20000
	got := collect(t, sub, n)
	size := func(i int) int {
		switch {
		case i%997 == 0:
			return 100 << 10 // chunked
		case i%101 == 0:
			return 6 << 10 // not batched
		}
		return 8 + i%50
	}
	subject := func(i int) string {
		if i%1000 < 500 {
			return "b.x"
		}
		return "b.y"
	}
	for i := 0; i < n; i++ {
		msg := make([]byte, size(i))
		copy(msg, fmt.Sprintf("%07d", i))
		if err := pub.Publish(subject(i), msg); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		m := recv(t, got)
		if len(m.Data) != size(i) || string(m.Data[:7]) != fmt.Sprintf("%07d", i) || m.Subject != subject(i) {
			t.Fatalf("message %d: got %d bytes %q on %s", i, len(m.Data), m.Data[:min(7, len(m.Data))], m.Subject)
		}
	}
}

// TestWatchBesideABlockedHandler: a watched subject's messages arrive
// while Run's handler is stuck on an earlier message (a dispatcher far
// behind), batched ones too; a chunked one is dropped, not reassembled.
func TestWatchBesideABlockedHandler(t *testing.T) {
	s := startServer(t, bus.ServerOptions{MaxPayload: 64 << 10})
	pub := dial(t, s, bus.ConnOptions{})
	drops := make(chan error, 4)
	sub := dial(t, s, bus.ConnOptions{OnError: func(err error) { drops <- err }})
	if _, err := sub.Subscribe("work"); err != nil {
		t.Fatal(err)
	}
	beats := make(chan bus.Message, 16)
	if _, err := sub.Watch("beat", func(m bus.Message) { beats <- m }); err != nil {
		t.Fatal(err)
	}
	sub.Flush(context.Background())
	stuck, release := make(chan struct{}, 1), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		sub.Run(ctx, func(bus.Message) {
			// The first message holds the handler until the end; a
			// non-blocking send here could find the test not yet
			// waiting, and nothing would ever be stuck.
			if first {
				first = false
				stuck <- struct{}{}
				<-release
			}
		})
	}()
	defer func() { close(release); cancel(); <-done }()
	if err := pub.Publish("work", []byte("first")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never got the first message")
	}
	for i := range 5 { // in one burst: batched
		if err := pub.Publish("beat", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if m := recv(t, beats); !bytes.Equal(m.Data, []byte{byte(i)}) {
			t.Fatalf("beat %d: got %v", i, m.Data)
		}
	}
	if err := pub.Publish("beat", make([]byte, 100<<10)); err != nil { // chunked
		t.Fatal(err)
	}
	select {
	case err := <-drops:
		var de *bus.DropError
		if !errors.As(err, &de) || de.Kind != bus.DropHeader {
			t.Fatalf("drop = %v, want a DropHeader", err)
		}
	case m := <-beats:
		t.Fatalf("a chunk of %d bytes reached the watcher", len(m.Data))
	case <-time.After(10 * time.Second):
		t.Fatal("the chunked message was neither dropped nor delivered")
	}
}

// TestConnectWaitsForTheServer: with ConnectFor, Connect tries again
// until a server that starts late listens; a wrong token still fails
// without waiting out ConnectFor.
func TestConnectWaitsForTheServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	token := bus.NewToken()
	type result struct {
		c   *bus.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := bus.Connect(url, bus.ConnOptions{Token: token, ConnectFor: 30 * time.Second})
		done <- result{c, err}
	}()
	time.Sleep(300 * time.Millisecond) // refused meanwhile
	s := startServer(t, bus.ServerOptions{Port: port, Token: token})
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("connect: %v", r.err)
		}
		r.c.Close()
	case <-time.After(20 * time.Second):
		t.Fatal("still connecting 20s after the server started")
	}
	go func() {
		_, err := bus.Connect(s.URL(), bus.ConnOptions{Token: "wrong", ConnectFor: time.Minute})
		done <- result{nil, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			t.Fatal("a wrong token connected")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a wrong token is tried again and again")
	}
}
