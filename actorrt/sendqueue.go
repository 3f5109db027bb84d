package actorrt

import "sync"

// sendQueue keeps the calls to a mesh made while where its members live is
// being refreshed, in the order made: a member on a proc that ended may
// be restarted on a new one (moves.go), and asking the owner takes up to
// the spawn timeout. The adverbs never wait for that: a call made then
// is encoded and queued, the adverb returns at once, and the queue's own
// goroutine asks the owner, then sends what it holds, in order, and
// later calls behind them, so that one sender's calls reach the mesh in
// the order made. A Call's future is bounded by its caller's ctx, as
// always; the refresh by the spawn timeout and the runtime's end.
//
// What waits is bounded as a mailbox is (WithMailboxLimit): a call that
// would pass the bound (the calls queued or being sent, and the bytes of
// their frames) is refused at once with ErrMailboxFull, to its adverb's
// caller, and never queued: a flood of calls during a long refresh is
// not held in unbounded memory, and no call is dropped unseen.
type sendQueue struct {
	mu    sync.Mutex
	busy  bool // a refresh, then the calls queued, are under way
	calls []queuedCall
	// waiting and waitingBytes count the calls queued or being sent, and
	// their frames' bytes, for the bound.
	waiting, waitingBytes int64
}

type queuedCall struct {
	c      *outCall
	size   int64       // its frame's bytes, for the bound
	failed func(error) // hears of a call that could not be sent
}

// due reports whether a call to reg of ref goes through the queue: one
// is under way, or a member of reg is on a proc that ended and the mesh
// may have moved it.
func (q *sendQueue) due(ref *meshRef, reg region) bool {
	q.mu.Lock()
	busy := q.busy
	q.mu.Unlock()
	return busy || ref.refreshDue(reg)
}

// add queues a copy of c if due (see due), with the function failed
// makes, starting the refresh if none is under way; it reports whether it
// did. A call not queued is the
// caller's to send (c is not kept: it may live in the caller's frame),
// unless err says why it was refused: past the bound, it is the caller's
// to fail.
func (q *sendQueue) add(c *outCall, failed func() func(error)) (queued bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.busy && !c.ref.refreshDue(c.reg) {
		return false, nil
	}
	size := int64(c.w.PayloadSize())
	if bound := c.ref.rt.opts.mailbox; !bound.fits(q.waiting, q.waitingBytes, size) {
		return false, bound.refusal("the queue of calls to mesh "+c.ref.name+" (waiting for where its members live now)", q.waiting, q.waitingBytes)
	}
	q.waiting++
	q.waitingBytes += size
	kept := *c
	q.calls = append(q.calls, queuedCall{&kept, size, failed()})
	if !q.busy {
		q.busy = true
		go q.drain(c.ref, c.reg)
	}
	return true, nil
}

// skipMissing tells c's reply port of this proc of the members of its
// region now known to be missing (a refresh told), which it then does
// not wait for; it reports whether none is left to answer.
func (c *outCall) skipMissing() bool {
	missing := c.ref.missingIn(c.reg)
	if missing == nil {
		return false
	}
	s, ok := c.ref.rt.ports.get(c.reply.id).(missingSkipper)
	return ok && s.skipMissing(missing)
}

// drain refreshes where ref's members live, then sends the queued calls
// in order until none is left.
func (q *sendQueue) drain(ref *meshRef, reg region) {
	rt := ref.rt
	rt.refreshMoves(rt.ctx, ref, reg)
	var sent []queuedCall // the batch sent last, still counted
	for {
		q.mu.Lock()
		q.waiting -= int64(len(sent))
		for _, qc := range sent {
			q.waitingBytes -= qc.size
		}
		calls := q.calls
		q.calls = nil
		if len(calls) == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for _, qc := range calls {
			c := qc.c
			if c.reply.proc == rt.procID {
				if c.skipMissing() {
					rt.ports.close(c.reply.id) // every member is missing: answered
					c.w.Free()
					continue
				}
				rt.ports.rewait(c.reply.id, ref.sendProcs(c.reg))
			}
			if err := c.post(); err != nil {
				qc.failed(err)
			}
			c.w.Free()
		}
		sent = calls
	}
}
