package actorrt

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// mailbox is an actor's queue of messages, served in arrival order by the
// actor's one goroutine, which one signal wakes (wake). It is bounded
// (WithMailboxLimit): a message that would pass the bound is refused with
// the error full builds, except the runtime's own (Init, Supervise), which
// always go in. Pushing never blocks, so the dispatcher is never held up by
// a busy actor.
//
// For a restart in place, what a failed instance leaves (leave) is handed
// over to its stand-in's mailbox (handOver), at the front, after what was
// handed over before; once an instance has left, what is routed to it
// comes back from flush, to be refused or passed on.
type mailbox struct {
	owner string // the actor's id, for the bound's error
	bound msgBound
	wake  chan struct{}

	mu     sync.Mutex
	queue  []envelope
	handed int  // how many at the front of queue came by handOver
	left   bool // leave was called: flush takes nothing more in

	spare []envelope // the batch taken last, its array reused; the server's alone

	// pending and pendingBytes count the messages queued or in hand, for
	// the bound.
	pending, pendingBytes atomic.Int64

	// staged holds what the delivery layer's route gave this mailbox in
	// the batch it is routing (under its receive lock, so one writer):
	// flush queues it all under one lock of mu.
	staged      []envelope
	stagedBytes int64
}

func (b *mailbox) setLimits(owner string, bound msgBound) {
	b.owner, b.bound = owner, bound
	b.wake = make(chan struct{}, 1)
}

// full is the error for a message of size bytes that finds n messages
// (bytes in all) waiting, or nil if it fits.
func (b *mailbox) full(n, bytes, size int64) error {
	if b.bound.fits(n, bytes, size) {
		return nil
	}
	return b.bound.refusal("actor "+b.owner, n, bytes)
}

// msgBound is the bound WithMailboxLimit sets on what waits: in an
// actor's mailbox, and in a mesh's send queue (sendqueue.go).
type msgBound struct{ messages, bytes int64 }

// fits reports whether a message of size bytes may join n messages
// (bytes in all) waiting.
func (m msgBound) fits(n, bytes, size int64) bool {
	return n < m.messages && bytes+size <= m.bytes
}

// refusal is the error for a message that does not fit where n messages
// (bytes in all) wait: what names the place.
func (m msgBound) refusal(what string, n, bytes int64) error {
	return fmt.Errorf("%w: %s has %d messages (%d bytes) waiting; the bound is %d messages, %d bytes (WithMailboxLimit)",
		ErrMailboxFull, what, n, bytes, m.messages, m.bytes)
}

// signal wakes the server, if it is not already to wake.
func (b *mailbox) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// push adds a message at the end.
func (b *mailbox) push(e envelope) error {
	size := int64(len(e.payload))
	if !e.init && e.failure == nil {
		if err := b.full(b.pending.Load(), b.pendingBytes.Load(), size); err != nil {
			return err
		}
	}
	b.pending.Add(1)
	b.pendingBytes.Add(size)
	b.mu.Lock()
	b.queue = append(b.queue, e)
	first := len(b.queue) == 1
	b.mu.Unlock()
	if first {
		b.signal()
	}
	return nil
}

// stage adds a message route hands over, for flush to queue with the rest
// of its batch; the bound counts what is staged. first says it is the
// first staged since the last flush: the caller lists the mailbox to
// flush. Call it under the delivery layer's receive lock only.
func (b *mailbox) stage(e envelope) (first bool, err error) {
	size := int64(len(e.payload))
	if err := b.full(b.pending.Load()+int64(len(b.staged)), b.pendingBytes.Load()+b.stagedBytes, size); err != nil {
		return false, err
	}
	b.staged = append(b.staged, e)
	b.stagedBytes += size
	return len(b.staged) == 1, nil
}

// flush queues what was staged, under one lock. Once the mailbox was
// left, it queues nothing and returns what was staged instead.
func (b *mailbox) flush() (refused []envelope) {
	b.mu.Lock()
	if b.left {
		b.mu.Unlock()
		refused = slices.Clone(b.staged)
		b.unstage()
		return refused
	}
	b.pending.Add(int64(len(b.staged)))
	b.pendingBytes.Add(b.stagedBytes)
	first := len(b.queue) == 0
	b.queue = append(b.queue, b.staged...)
	b.mu.Unlock()
	b.unstage()
	if first {
		b.signal()
	}
	return nil
}

func (b *mailbox) unstage() {
	clear(b.staged)
	b.staged, b.stagedBytes = b.staged[:0], 0
}

// take returns the whole queue, for the server to handle in order; it
// calls served for each message, then recycle.
func (b *mailbox) take() []envelope {
	b.mu.Lock()
	batch := b.queue
	b.queue = b.spare[:0]
	b.handed = 0
	b.mu.Unlock()
	return batch
}

// served counts *e out of the bound and clears it.
func (b *mailbox) served(e *envelope) {
	b.pending.Add(-1)
	b.pendingBytes.Add(-int64(len(e.payload)))
	*e = envelope{}
}

// recycle keeps a handled batch's array for the next take.
func (b *mailbox) recycle(batch []envelope) { b.spare = batch[:0] }

// handOver puts q in the mailbox before what came any other way: first,
// or after what was handed over before. It is not bounded: q was
// admitted once already (or is an Init).
func (b *mailbox) handOver(q []envelope, first bool) {
	var size int64
	for i := range q {
		size += int64(len(q[i].payload))
	}
	b.pending.Add(int64(len(q)))
	b.pendingBytes.Add(size)
	b.mu.Lock()
	pos := b.handed
	if first {
		pos = 0
	}
	b.queue = slices.Insert(b.queue, pos, q...)
	b.handed += len(q)
	b.mu.Unlock()
	b.signal()
}

// leave empties the mailbox as its actor ends: it returns q (the rest of
// a batch in hand) and then the queue; what flush is given from now on
// comes back too.
func (b *mailbox) leave(q []envelope) []envelope {
	b.mu.Lock()
	q = append(q, b.queue...)
	b.queue = nil
	b.left = true
	b.mu.Unlock()
	return q
}
