package bus

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Batching. A process that sends many small messages in a burst (a loop of
// broadcasts, 16 actors answering at once, a chatty log) pays the NATS
// server and every receiver a fixed cost per message. So while a burst
// lasts, Publish appends small messages for the same subject to one
// pending NATS message and a flusher goroutine sends it as soon as it can:
// under load batches grow by themselves, and an isolated message, which
// does not look like a burst, goes out at once without the extra hop.
//
// Order is kept: at most one batch is pending, every NATS publish happens
// under pubMu in call order, and a message for another subject (or a large
// one) first flushes the pending batch.
const (
	// batchHeader marks a batch; its value is the number of messages.
	batchHeader = "Mon-Batch"
	// burstGap: a Publish within this time of the previous one is part of a
	// burst.
	burstGap = 20 * time.Microsecond
	// batchSmall is the largest message that is batched; larger ones are
	// not worth a copy.
	batchSmall = 4 << 10
	// batchMax bounds a batch's size.
	batchMax = 64 << 10
)

// clockBase anchors the monotonic clock readings of lastPub (the last
// publish that started a burst, or the last batch sent).
var clockBase = time.Now()

// Publish sends data on subject. It does not wait for the server; the
// bytes go out in order with every other Publish of this Conn. The caller
// may reuse data once Publish returns. A message over 1 MiB (or the
// server's max payload, if smaller) is sent in chunks; one over MaxMessage
// is refused with ErrTooLarge before anything is sent.
func (c *Conn) Publish(subject string, data []byte) error {
	return c.publish(subject, data, nil, len(data), true)
}

// PublishParts sends the parts, one after the other, as one message, as
// Publish does, without first joining them into one buffer: a large
// message is sent in chunks taken straight from the parts. The caller may
// reuse the parts once PublishParts returns.
func (c *Conn) PublishParts(subject string, parts [][]byte) error {
	if len(parts) == 1 {
		return c.Publish(subject, parts[0])
	}
	return c.publish(subject, nil, parts, partsSize(parts), true)
}

// PublishNow is PublishParts for a message that must not wait in a batch
// (the caller batches itself): a pending batch goes first, then it, at
// once.
func (c *Conn) PublishNow(subject string, parts [][]byte) error {
	if len(parts) == 1 {
		return c.publish(subject, parts[0], nil, len(parts[0]), false)
	}
	return c.publish(subject, nil, parts, partsSize(parts), false)
}

func partsSize(parts [][]byte) int {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	return size
}

// publish sends data, or the parts if there are any, of size bytes; in a
// batch while a burst lasts, if it may.
func (c *Conn) publish(subject string, data []byte, parts [][]byte, size int, mayBatch bool) error {
	if size > c.maxMessage {
		return fmt.Errorf("%w: %d bytes on %s (limit %d)", ErrTooLarge, size, subject, c.maxMessage)
	}
	if err := c.awaitHub(); err != nil {
		return err
	}
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	// A pending batch is a burst going on; otherwise the clock says (read
	// only then: a clock reading per message is a tenth of its cost).
	burst := c.pending.count > 0
	if !burst && mayBatch {
		now := time.Since(clockBase)
		burst = now-c.lastPub < burstGap
		c.lastPub = now
	}
	if c.pending.count > 0 && (!mayBatch || subject != c.pending.subject || size > batchSmall || len(c.pending.buf)+size > batchMax) {
		if err := c.flushPendingLocked(); err != nil {
			return err
		}
	}
	if size > c.chunkSize() {
		if parts == nil {
			parts = [][]byte{data}
		}
		return c.publishChunked(subject, parts, size)
	}
	if size > batchSmall || !mayBatch || !burst && c.pending.count == 0 {
		if parts != nil {
			data = c.gather(parts, size)
		}
		return mapErr(c.nc.Publish(subject, data))
	}
	p := &c.pending
	if p.count == 0 {
		// A batch is sent later, by the flusher: a subject NATS refuses
		// must fail here, in the caller, not there.
		if !validSubject(subject) {
			return fmt.Errorf("bus: publish on %q: %w", subject, nats.ErrBadSubject)
		}
		p.subject = subject
		p.buf = p.buf[:0]
		p.first = 0
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	p.buf = binary.AppendUvarint(p.buf, uint64(size))
	if p.count == 0 {
		p.first = len(p.buf)
	}
	if parts != nil {
		for _, part := range parts {
			p.buf = append(p.buf, part...)
		}
	} else {
		p.buf = append(p.buf, data...)
	}
	p.count++
	return nil
}

// gather joins parts of size bytes in the Conn's scratch buffer, which
// NATS copies from before the next publish; hold pubMu.
func (c *Conn) gather(parts [][]byte, size int) []byte {
	b := c.scratch[:0]
	if cap(b) < size {
		b = make([]byte, 0, max(size, min(2*cap(b), maxScratch)))
	}
	for _, p := range parts {
		b = append(b, p...)
	}
	if cap(b) <= maxScratch {
		c.scratch = b
	}
	return b
}

// batch is the pending batch: count messages for subject, each as a
// uvarint length and the bytes.
type batch struct {
	subject string
	buf     []byte
	first   int // where the first message's bytes start
	count   int
}

// flusher sends the pending batch whenever it is kicked.
func (c *Conn) flusher() {
	for {
		select {
		case <-c.kick:
		case <-c.closed:
			return
		}
		c.pubMu.Lock()
		if err := c.flushPendingLocked(); err != nil {
			c.report(fmt.Errorf("bus: send batch: %w", err))
		}
		c.pubMu.Unlock()
	}
}

// flushPendingLocked sends the pending batch; hold pubMu.
func (c *Conn) flushPendingLocked() error {
	p := &c.pending
	if p.count == 0 {
		return nil
	}
	n := p.count
	p.count = 0
	// What comes next within burstGap of this goes on the burst.
	c.lastPub = time.Since(clockBase)
	if n == 1 {
		// A batch of one is just the message.
		return mapErr(c.nc.Publish(p.subject, p.buf[p.first:]))
	}
	m := &nats.Msg{Subject: p.subject, Data: p.buf, Header: nats.Header{batchHeader: []string{strconv.Itoa(n)}}}
	return mapErr(c.nc.PublishMsg(m))
}

// unbatch hands each message of a batch to handle, in order. A batch whose
// count is not a number, or larger than its bytes could hold, is dropped
// whole; one cut short, or with bytes left over, is dropped from the fault
// on (the messages before it were whole and are handled).
func (c *Conn) unbatch(m *nats.Msg, count string, handle func(Message)) {
	n, err := strconv.Atoi(count)
	// Every message takes at least its one-byte length.
	if err != nil || n < 1 || n > len(m.Data) {
		c.drop(DropBatch, m.Subject, "batch header %q for %d bytes", count, len(m.Data))
		return
	}
	b := m.Data
	for i := 0; i < n; i++ {
		size, k := uint64(0), 0
		if len(b) > 0 && b[0] < 0x80 {
			size, k = uint64(b[0]), 1 // the common one-byte length
		} else {
			size, k = binary.Uvarint(b)
		}
		if k <= 0 || size > uint64(len(b)-k) {
			c.drop(DropBatch, m.Subject, "batch of %d messages in %d bytes: message %d is cut", n, len(m.Data), i+1)
			return
		}
		b = b[k:]
		// Three-index slice: a handler that appends cannot overwrite the
		// next message.
		handle(Message{Subject: m.Subject, Data: b[:size:size]})
		b = b[size:]
	}
	if len(b) > 0 {
		c.drop(DropBatch, m.Subject, "batch of %d messages in %d bytes: %d bytes left over", n, len(m.Data), len(b))
	}
}

// validSubject reports whether NATS takes subject for a publish: not
// empty, no whitespace (nats.go refuses those).
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n':
			return false
		}
	}
	return true
}
