package bus

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// A Conn's receive queue. NATS's reader hands every message of every
// subscription to one channel, in wire order, and never blocks on it: a
// full channel drops the message (slow consumer). A channel cannot grow,
// so one sized for a proc's bursts (DefaultQueueLen, 2 MB of pointers)
// would be allocated, and scanned by the collector, in every process
// that holds a Conn, thousands of them in one test process. So the
// channel is a short transit (ConnOptions.Transit), and the pump, a goroutine
// that does nothing else, moves what arrives into a ring that grows on
// demand up to QueueLen and shrinks back once drained. Run takes from
// the ring. The order is kept (one reader, one pump, one Run), and so is
// the bound: past QueueLen waiting the pump drops and reports
// ErrSlowConsumer, once until a message fits again, as NATS does for
// the transit.
//
// A message that arrives alone, while Run waits with nothing queued, is
// handed to Run's handler by the pump itself (inline): going through the
// ring would wake Run's goroutine for it, a hand-off that is a tenth of
// a round trip between two procs. The handler is still called one
// message at a time in wire order: whoever calls it (Run, or the pump
// while Run waits) holds handling, and empties the ring before the
// pump's message. The pump takes a message inline only when nothing else
// is in transit, so under a burst it goes on moving messages into the
// ring while Run handles them, as before; while it handles one inline,
// what arrives waits in transit, as it does while the pump waits for a
// CPU.

// DefaultTransit is ConnOptions.Transit's default: what NATS's reader
// can deliver while the pump waits to run. The pump is readied by the
// reader's own send, so it runs as soon as the reader waits for input;
// 4,096 messages (32 KB) are a few milliseconds of a reader that never
// waits.
const DefaultTransit = 1 << 12

// minRing is the ring's first length, and the length a drained ring
// keeps; a longer one is given back once empty.
const minRing = 64

type recvQueue struct {
	transit chan *nats.Msg // NATS's reader sends here; only the pump receives
	pumped  chan struct{}  // closed once the pump ended: everything is in the ring
	ready   chan struct{}  // a token: the ring has messages

	// handling is held by whoever calls the handler: Run, or the pump
	// inline. inline is Run's handler while Run runs (nil otherwise),
	// read and written under handling.
	handling sync.Mutex
	inline   func(*nats.Msg)

	mu       sync.Mutex
	ring     []*nats.Msg // a power of two long, or nil
	head, n  int
	limit    int  // at most this many wait in the ring
	dropping bool // a message was dropped, and none fitted since
	dropped  int  // messages dropped at the limit, ever
}

func newRecvQueue(limit, transit int) *recvQueue {
	return &recvQueue{
		transit: make(chan *nats.Msg, min(limit, transit)),
		pumped:  make(chan struct{}),
		ready:   make(chan struct{}, 1),
		limit:   limit,
	}
}

// pump moves what NATS delivers into the ring until closed is closed,
// then what is left in transit, and closes q.pumped. slow is called when
// the ring is full and messages start being dropped.
func (q *recvQueue) pump(closed <-chan struct{}, slow func()) {
	defer close(q.pumped)
	batch := make([]*nats.Msg, 0, 256)
	for {
		select {
		case m := <-q.transit:
			if len(q.transit) == 0 && q.handleInline(m) {
				continue
			}
			batch = append(batch[:0], m)
			for len(batch) < cap(batch) && q.takeTransit(&batch) {
			}
			q.push(batch, slow)
			clear(batch)
		case <-closed:
			// The reader is done: nothing more comes into transit.
			for {
				batch = batch[:0]
				for len(batch) < cap(batch) && q.takeTransit(&batch) {
				}
				if len(batch) == 0 {
					return
				}
				q.push(batch, slow)
				clear(batch)
			}
		}
	}
}

// handleInline hands m, and what the ring holds before it, to Run's
// handler on the pump's goroutine, if Run runs and handles nothing now;
// false if it did not (m is then the pump's to queue).
func (q *recvQueue) handleInline(m *nats.Msg) bool {
	if !q.handling.TryLock() {
		return false
	}
	defer q.handling.Unlock()
	if q.inline == nil {
		return false
	}
	var batch [16]*nats.Msg
	for {
		b := q.take(batch[:0])
		if len(b) == 0 {
			break
		}
		for _, queued := range b {
			q.inline(queued)
		}
		clear(b)
	}
	q.inline(m)
	return true
}

// takeTransit appends a message from transit to batch, if one is there.
func (q *recvQueue) takeTransit(batch *[]*nats.Msg) bool {
	select {
	case m := <-q.transit:
		*batch = append(*batch, m)
		return true
	default:
		return false
	}
}

// push appends ms to the ring, dropping those past the limit.
func (q *recvQueue) push(ms []*nats.Msg, slow func()) {
	q.mu.Lock()
	report := false
	for _, m := range ms {
		if q.n == q.limit {
			report = report || !q.dropping
			q.dropping = true
			q.dropped++
			continue
		}
		q.dropping = false
		if q.n == len(q.ring) {
			q.grow()
		}
		q.ring[(q.head+q.n)&(len(q.ring)-1)] = m
		q.n++
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	if report {
		slow()
	}
}

func (q *recvQueue) grow() {
	ring := make([]*nats.Msg, max(minRing, 2*len(q.ring)))
	for i := range q.n {
		ring[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
	}
	q.ring, q.head = ring, 0
}

// take moves up to cap(into)-len(into) of the oldest messages into into.
func (q *recvQueue) take(into []*nats.Msg) []*nats.Msg {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n > 0 && len(into) < cap(into) {
		i := q.head & (len(q.ring) - 1)
		into = append(into, q.ring[i])
		q.ring[i] = nil
		q.head++
		q.n--
	}
	if q.n == 0 {
		q.head = 0
		if len(q.ring) > minRing {
			q.ring = nil // a burst's ring: given back
		}
	}
	return into
}

// counts is how many messages wait in the ring, and how many were
// dropped at its limit.
func (q *recvQueue) counts() (waiting, dropped int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n, q.dropped
}
