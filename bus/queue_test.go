package bus

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// queuePair is a publisher and a subscriber on subjects q.a and q.b of a
// server of their own; the subscriber's queue is bounded at limit and
// its errors counted.
func queuePair(t *testing.T, limit int) (pub, sub *Conn, slow *atomic.Int32) {
	t.Helper()
	s, err := StartServer(ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	slow = new(atomic.Int32)
	conn := func(o ConnOptions) *Conn {
		o.Token = s.Token()
		c, err := Connect(s.URL(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	pub = conn(ConnOptions{})
	sub = conn(ConnOptions{QueueLen: limit, OnError: func(err error) {
		if errors.Is(err, ErrSlowConsumer) {
			slow.Add(1)
		}
	}})
	for _, subj := range []string{"q.a", "q.b"} {
		if _, err := sub.Subscribe(subj); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pub, sub, slow
}

// publishRounds sends messages numbered from..to-1, unbatched, on q.a
// and q.b in turn, in rounds of 1,000 (under the transit's length), each
// waiting until the pump has moved all of them (queued or dropped at the
// ring's limit): what is queued beyond the transit is the ring's doing.
func publishRounds(t *testing.T, pub, sub *Conn, from, to int) {
	t.Helper()
	_, dropped0 := sub.queue.counts()
	for i := from; i < to; {
		for end := min(to, i+1000); i < end; i++ {
			subj := "q.a"
			if i%2 == 1 {
				subj = "q.b"
			}
			if err := pub.PublishNow(subj, [][]byte{[]byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			queued, dropped := sub.queue.counts()
			if queued+dropped-dropped0 == i-from {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %d sent, %d queued and %d dropped (%d in transit)", i-from, queued, dropped-dropped0, len(sub.queue.transit))
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// runUntil runs sub until it handed over n messages, and checks that
// they are 0..n-1 in order.
func runUntil(t *testing.T, sub *Conn, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next := 0
	err := sub.Run(ctx, func(m Message) {
		if next == n {
			t.Errorf("a message past %d: %s on %s", n, m.Data, m.Subject)
			return
		}
		if got, _ := strconv.Atoi(string(m.Data)); got != next || m.Subject != []string{"q.a", "q.b"}[next%2] {
			t.Errorf("message %d is %s on %s", next, m.Data, m.Subject)
		}
		if next++; next == n {
			cancel()
		}
	})
	if next != n {
		t.Fatalf("Run = %v after %d messages, want %d", err, next, n)
	}
	if queued, _ := sub.queue.counts(); queued != 0 {
		t.Fatalf("%d messages still queued after the %d", queued, n)
	}
}

// TestQueueGrowsInOrder: a queue far past the transit's length, with
// nobody running the Conn, keeps every message, in order across
// subjects, and gives its ring back once Run has drained it.
func TestQueueGrowsInOrder(t *testing.T) {
	const n = 20_000
	pub, sub, slow := queuePair(t, DefaultQueueLen)
	publishRounds(t, pub, sub, 0, n)
	sub.queue.mu.Lock()
	grown := len(sub.queue.ring)
	sub.queue.mu.Unlock()
	if grown < n || grown > 2*n {
		t.Errorf("ring of %d for %d messages", grown, n)
	}
	runUntil(t, sub, n)
	if slow.Load() != 0 {
		t.Errorf("%d slow-consumer reports for %d messages under the bound", slow.Load(), n)
	}
	sub.queue.mu.Lock()
	defer sub.queue.mu.Unlock()
	if len(sub.queue.ring) > minRing {
		t.Errorf("a drained ring keeps %d slots", len(sub.queue.ring))
	}
}

// TestQueueBoundRefused: past QueueLen, messages are dropped and
// reported as a slow consumer, once; the first QueueLen are delivered
// in order; once drained, the queue takes messages again.
func TestQueueBoundRefused(t *testing.T) {
	const limit = 5_000
	pub, sub, slow := queuePair(t, limit)
	publishRounds(t, pub, sub, 0, 8_000)
	for deadline := time.Now().Add(10 * time.Second); slow.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // reported just after the drop is counted
	}
	if got := slow.Load(); got != 1 {
		t.Fatalf("%d slow-consumer reports, want 1", got)
	}
	if queued, dropped := sub.queue.counts(); queued != limit || dropped != 3_000 {
		t.Fatalf("%d queued and %d dropped, want the bound %d and 3000", queued, dropped, limit)
	}
	runUntil(t, sub, limit)
	// The queue takes messages again: these are numbered from 0 anew.
	publishRounds(t, pub, sub, 0, 100)
	runUntil(t, sub, 100)
	if got := slow.Load(); got != 1 {
		t.Fatalf("%d slow-consumer reports after the queue drained, want still 1", got)
	}
}

// TestQueueSizedToUse: a Conn's queue costs what it holds, not its bound
// (2^18 pointers, 2 MB, when it was a channel made at its full length).
func TestQueueSizedToUse(t *testing.T) {
	s, err := StartServer(ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	const conns = 20
	before := heapInUse()
	for range conns {
		c, err := ConnectInProcess(s, ConnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if _, err := c.Subscribe("x"); err != nil {
			t.Fatal(err)
		}
	}
	per := (heapInUse() - before) / conns
	if per > 256<<10 {
		t.Fatalf("an idle Conn holds %d KiB", per>>10)
	}
	t.Logf("an idle Conn holds %d KiB", per>>10)
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestRunInlineInOrder: messages that arrive alone (handed over by the
// pump while Run waits) and in bursts (queued while the handler is slow)
// reach the handler one at a time, in order across subjects.
func TestRunInlineInOrder(t *testing.T) {
	const n = 3_000
	pub, sub, slow := queuePair(t, DefaultQueueLen)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var in atomic.Int32
	next := 0
	done := make(chan error, 1)
	go func() {
		done <- sub.Run(ctx, func(m Message) {
			if in.Add(1) != 1 {
				t.Errorf("the handler entered twice at once, at message %d", next)
			}
			if got, _ := strconv.Atoi(string(m.Data)); got != next || m.Subject != []string{"q.a", "q.b"}[next%2] {
				t.Errorf("message %d is %s on %s", next, m.Data, m.Subject)
			}
			if next%500 == 250 {
				time.Sleep(5 * time.Millisecond) // what comes meanwhile queues
			}
			if next++; next == n {
				cancel()
			}
			in.Add(-1)
		})
	}()
	for i := 0; i < n; i++ {
		if err := pub.PublishNow([]string{"q.a", "q.b"}[i%2], [][]byte{[]byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		if i%100 < 50 { // alone, then a burst
			if err := pub.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	if err := <-done; !errors.Is(err, context.Canceled) || next != n {
		t.Fatalf("Run = %v after %d messages, want %d", err, next, n)
	}
	if slow.Load() != 0 {
		t.Errorf("%d slow-consumer reports", slow.Load())
	}
}

// TestRunReturnedHandsNothing: once Run returned, its handler is called
// no more, even for a message that arrives alone: it waits in the queue
// for the next Run.
func TestRunReturnedHandsNothing(t *testing.T) {
	pub, sub, _ := queuePair(t, DefaultQueueLen)
	ctx, cancel := context.WithCancel(context.Background())
	var after atomic.Int32
	ran := make(chan error, 1)
	go func() { ran <- sub.Run(ctx, func(Message) { after.Add(1) }) }()
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	const n = 10
	for i := range n {
		// One at a time, each queued before the next is sent: alone.
		if err := pub.PublishNow([]string{"q.a", "q.b"}[i%2], [][]byte{[]byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if queued, _ := sub.queue.counts(); queued == i+1 {
				break
			}
			if after.Load() != 0 || time.Now().After(deadline) {
				t.Fatalf("message %d: a returned Run's handler got %d messages", i, after.Load())
			}
		}
	}
	runUntil(t, sub, n)
}
