package bus

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// chunkHeader marks one part of a message larger than the server's max
// payload. Its value is "<id> <index> <count> <total size>". Whole
// messages carry no NATS header at all, so the common path pays nothing.
const chunkHeader = "Mon-Chunk"

// headerRoom is what a chunk leaves of the max payload for its header.
const headerRoom = 256

// partialTTL bounds how long a half-received message is kept: a sender that
// dies mid-message must not leak its parts forever.
const partialTTL = time.Minute

type partial struct {
	buf     []byte
	next    int
	count   int
	started time.Time
}

func (c *Conn) publishChunked(subject string, data []byte) error {
	if len(data) > c.maxMessage {
		return fmt.Errorf("%w: %d bytes on %s (limit %d)", ErrTooLarge, len(data), subject, c.maxMessage)
	}
	size := c.MaxPayload() - headerRoom
	count := (len(data) + size - 1) / size
	id := c.chunkBase + strconv.FormatUint(c.chunkSeq.Add(1), 36)
	for i := 0; i < count; i++ {
		lo, hi := i*size, min((i+1)*size, len(data))
		m := &nats.Msg{
			Subject: subject,
			Data:    data[lo:hi],
			Header:  nats.Header{chunkHeader: []string{fmt.Sprintf("%s %d %d %d", id, i, count, len(data))}},
		}
		if err := c.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("bus: publish part %d/%d of %d bytes on %s: %w", i+1, count, len(data), subject, mapErr(err))
		}
	}
	return nil
}

// reassemble adds one chunk and returns the whole message once its last
// part is in, or nil while parts are missing. Parts of one message come
// from one publisher on one subject, so NATS delivers them in order.
func (c *Conn) reassemble(m *nats.Msg) ([]byte, error) {
	v := m.Header.Get(chunkHeader)
	f := strings.Fields(v)
	if len(f) != 4 {
		return nil, fmt.Errorf("%w: header %q on %s", ErrBadChunk, v, m.Subject)
	}
	id := f[0]
	idx, err1 := strconv.Atoi(f[1])
	count, err2 := strconv.Atoi(f[2])
	total, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil || count < 1 || idx < 0 || idx >= count || total < 0 || total > c.maxMessage {
		return nil, fmt.Errorf("%w: header %q on %s", ErrBadChunk, v, m.Subject)
	}
	p := c.partials[id]
	if p == nil {
		if idx != 0 {
			return nil, fmt.Errorf("%w: message %s on %s starts at part %d", ErrBadChunk, id, m.Subject, idx)
		}
		c.expirePartials()
		p = &partial{buf: make([]byte, 0, total), count: count, started: time.Now()}
		c.partials[id] = p
	}
	if idx != p.next || len(p.buf)+len(m.Data) > cap(p.buf) {
		delete(c.partials, id)
		return nil, fmt.Errorf("%w: message %s on %s: got part %d, want %d", ErrBadChunk, id, m.Subject, idx, p.next)
	}
	p.buf = append(p.buf, m.Data...)
	p.next++
	if p.next < p.count {
		return nil, nil
	}
	delete(c.partials, id)
	if len(p.buf) != cap(p.buf) {
		return nil, fmt.Errorf("%w: message %s on %s: %d of %d bytes", ErrBadChunk, id, m.Subject, len(p.buf), cap(p.buf))
	}
	return p.buf, nil
}

func (c *Conn) expirePartials() {
	for id, p := range c.partials {
		if time.Since(p.started) > partialTTL {
			delete(c.partials, id)
			c.report(fmt.Errorf("%w: message %s incomplete after %s, dropped", ErrBadChunk, id, partialTTL))
		}
	}
}
