package dtensor

import (
	"context"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// The outbox. An op every proc runs alike is not sent at once: the mesh
// keeps it with those recorded after it and sends them together, one
// message per proc (opsFn), when something waits for the procs (a fetch,
// ToMesh, a shard handed to an actor), when maxBatch are kept, or
// batchDelay after the first (so that an op never waits longer than
// that to go). A step of a training loop is then a few messages per proc
// instead of one per op: an op costs each proc a message's decoding and
// dispatch, which is most of a small op's time. Each proc still runs the
// ops in the order they were recorded: a batch and a single op reach the
// same mailbox, and the outbox is flushed before any op sent alone.

const (
	// maxBatch is the most ops a batch holds.
	maxBatch = 256
	// maxBatchBytes bounds the data ops (the client's own data) a batch
	// carries; a larger one goes alone.
	maxBatchBytes = 256 << 10
	// batchDelay is the longest an op waits in the outbox.
	batchDelay = 2 * time.Millisecond
)

// opsFn runs a batch of ops on this proc, in order.
var opsFn = actorrt.Remote1("monarch_dtensor_ops", func(ctx context.Context, ops batch) (actorrt.Void, error) {
	for _, o := range ops {
		runAndKeep(ctx, o)
	}
	return actorrt.Void{}, nil
})

// queue keeps o, for every proc alike, to go with the next batch; an
// error is that of a batch before it that could not be sent.
func (m *Mesh) queue(o op) error {
	if len(o.Raw) > maxBatchBytes {
		if err := m.flush(); err != nil {
			return err
		}
		return opFn.Broadcast(m.procs, o)
	}
	m.outMu.Lock()
	defer m.outMu.Unlock()
	if m.outErr != nil {
		return m.takeErrLocked()
	}
	m.keepLocked(o)
	if len(m.out) >= maxBatch || m.outBytes > maxBatchBytes {
		return m.flushLocked()
	}
	return nil
}

// keepLocked adds ops to the batch kept, which the timer sends after
// batchDelay at the latest.
func (m *Mesh) keepLocked(ops ...op) {
	m.out = append(m.out, ops...)
	for _, o := range ops {
		m.outBytes += len(o.Raw)
	}
	if m.timer == nil {
		m.timer = time.AfterFunc(batchDelay, m.send)
	}
}

// flush sends the ops kept; its error, or that of a batch the timer
// could not send, is returned once.
func (m *Mesh) flush() error {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	return m.flushLocked()
}

// send sends the ops kept; an error waits for the next op or flush.
func (m *Mesh) send() {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	m.sendLocked()
}

func (m *Mesh) flushLocked() error {
	m.sendLocked()
	return m.takeErrLocked()
}

func (m *Mesh) sendLocked() {
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	if len(m.out) > 0 {
		var err error
		if len(m.out) == 1 {
			err = opFn.Broadcast(m.procs, m.out[0])
		} else {
			err = opsFn.Broadcast(m.procs, batch(m.out))
		}
		m.out, m.outBytes = nil, 0
		if err != nil && m.outErr == nil {
			m.outErr = err
		}
	}
}

func (m *Mesh) takeErrLocked() error {
	err := m.outErr
	m.outErr = nil
	return err
}
