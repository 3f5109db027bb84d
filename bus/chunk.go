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

// Limits of reassembly. Every number in a chunk header is checked against
// them and against the bytes that actually arrived before anything is
// allocated: a part claims a place in a message whose size is bound to
// its own length, and a message's buffer is allocated only once half of
// its bytes are in, so what a receiver holds is at most twice what it was
// sent, and never more than ConnOptions.MaxReassembly over all senders.
const (
	// PartialTTL bounds how long a half-received message is kept: a sender
	// that dies mid-message must not leak its parts.
	PartialTTL = time.Minute
	// DefaultMaxReassembly is the default of ConnOptions.MaxReassembly:
	// twice the default MaxMessage.
	DefaultMaxReassembly = 2 * DefaultMaxMessage
	// maxChunkID bounds a message id (ours are about 20 characters).
	maxChunkID = 64
	// partialOverhead is what a message in reassembly counts against
	// MaxReassembly besides its bytes: more than its bookkeeping takes.
	partialOverhead = 1 << 10
)

// partial is a chunked message whose parts are arriving.
type partial struct {
	subject string
	count   int // parts in all
	total   int // bytes in all
	partLen int // length of every part but the last
	next    int // index of the part expected next
	have    int // bytes received
	// parts holds the parts received until half the message is in; then
	// buf, allocated once at the message's size, takes over.
	parts   [][]byte
	buf     []byte
	charge  int  // what it counts against MaxReassembly now
	discard bool // dropped: its later parts are swallowed until the last
	started time.Time
}

// chunkPart is a parsed chunk header.
type chunkPart struct {
	id                  string
	index, count, total int
}

func (h chunkPart) String() string {
	return fmt.Sprintf("%s %d %d %d", h.id, h.index, h.count, h.total)
}

// parseChunkHeader reads "<id> <index> <count> <total>" and checks each
// number against the others and against maxMessage.
func parseChunkHeader(v string, maxMessage int) (chunkPart, error) {
	var h chunkPart
	id, rest, ok1 := strings.Cut(v, " ")
	index, rest, ok2 := strings.Cut(rest, " ")
	count, total, ok3 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !ok3 || id == "" || len(id) > maxChunkID {
		return h, fmt.Errorf("chunk header %q: want <id> <index> <count> <size>", v)
	}
	var err1, err2, err3 error
	h.id = id
	h.index, err1 = strconv.Atoi(index)
	h.count, err2 = strconv.Atoi(count)
	h.total, err3 = strconv.Atoi(total)
	switch {
	case err1 != nil || err2 != nil || err3 != nil:
		return h, fmt.Errorf("chunk header %q: a number that is not one", v)
	case h.total < 1 || h.total > maxMessage:
		return h, fmt.Errorf("chunk header %q: size outside [1, %d]", v, maxMessage)
	case h.count < 1 || h.count > h.total || h.index < 0 || h.index >= h.count:
		return h, fmt.Errorf("chunk header %q: part outside the message", v)
	}
	return h, nil
}

// checkFirst checks that part 0 of length n can begin the message: every
// part but the last is as long as the first, so count and total must agree
// with n.
func (h chunkPart) checkFirst(n int) error {
	switch {
	case h.index != 0:
		return fmt.Errorf("message starts at part %d", h.index)
	case n < 1 || n > h.total || h.count != (h.total+n-1)/n:
		return fmt.Errorf("a first part of %d bytes cannot begin %d bytes in %d parts", n, h.total, h.count)
	}
	return nil
}

// checkNext checks that a part of length n is the one p waits for.
func (p *partial) checkNext(subject string, h chunkPart, n int) error {
	want := p.partLen
	if h.index == p.count-1 {
		want = p.total - (p.count-1)*p.partLen
	}
	switch {
	case subject != p.subject:
		return fmt.Errorf("part %d came on %s, the message on %s", h.index, subject, p.subject)
	case h.count != p.count || h.total != p.total:
		return fmt.Errorf("part %d claims %d bytes in %d parts, the message %d in %d", h.index, h.total, h.count, p.total, p.count)
	case h.index != p.next:
		return fmt.Errorf("got part %d, want %d", h.index, p.next)
	case n != want:
		return fmt.Errorf("part %d has %d bytes, want %d", h.index, n, want)
	}
	return nil
}

// add takes the next part. Its bytes are kept as they are until half the
// message is in, then copied once into a buffer of the message's size.
func (p *partial) add(data []byte) {
	p.have += len(data)
	p.next++
	if p.buf == nil && 2*p.have < p.total {
		p.parts = append(p.parts, data)
		return
	}
	if p.buf == nil {
		p.buf = make([]byte, 0, p.total)
		for _, q := range p.parts {
			p.buf = append(p.buf, q...)
		}
		p.parts = nil
	}
	p.buf = append(p.buf, data...)
}

// chargeAfter is what p would count against MaxReassembly with n more
// bytes.
func (p *partial) chargeAfter(id string, n int) int {
	if p.buf != nil || 2*(p.have+n) >= p.total {
		return partialOverhead + len(id) + p.total
	}
	return partialOverhead + len(id) + p.have + n
}

// A message over chunkSize bytes is sent in chunks of that size (the last
// may be shorter). They are smaller than the server's max payload: the
// server passes a message on only once all of it has come, so small
// chunks keep the sender, the server and the receiver busy at once
// (measured with BenchmarkLarge64MiB: 8 MiB chunks were slower).
const (
	maxChunk = 1 << 20
	// maxScratch bounds the buffer a Conn keeps for joining parts.
	maxScratch = maxChunk
)

// chunkSize is the length of every part of a chunked message but the
// last: maxChunk, or what the server takes in one piece less room for the
// header.
func (c *Conn) chunkSize() int { return min(c.maxPayload-headerRoom, maxChunk) }

// publishChunked sends the parts, size bytes in all, as a chunked
// message; hold pubMu. A chunk that lies within one part is published as
// it is, one that spans parts is gathered first: NATS copies each before
// the next.
func (c *Conn) publishChunked(subject string, parts [][]byte, size int) error {
	id := c.chunkBase + strconv.FormatUint(c.chunkSeq.Add(1), 36)
	m := &nats.Msg{Subject: subject, Header: nats.Header{chunkHeader: []string{""}}}
	return splitParts(id, parts, size, c.chunkSize(), &c.scratch, func(value string, part []byte) error {
		m.Header[chunkHeader][0], m.Data = value, part
		if err := c.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("bus: publish part %q of %d bytes on %s: %w", value, size, subject, mapErr(err))
		}
		return nil
	})
}

// splitChunks cuts data into parts of size bytes (the last may be
// shorter) and hands each to emit with its chunk header's value.
func splitChunks(id string, data []byte, size int, emit func(value string, part []byte) error) error {
	return splitParts(id, [][]byte{data}, len(data), size, nil, emit)
}

// splitParts is splitChunks of the message that is parts joined, total
// bytes long. A chunk within one part is a slice of it; one that spans
// parts is gathered in *scratch (which may be nil), valid until the next
// emit.
func splitParts(id string, parts [][]byte, total, size int, scratch *[]byte, emit func(value string, part []byte) error) error {
	count := (total + size - 1) / size
	var buf []byte
	if scratch != nil {
		buf = *scratch
	}
	k, off := 0, 0 // the next byte is parts[k][off]
	for i := 0; i < count; i++ {
		n := min(size, total-i*size)
		for off == len(parts[k]) {
			k, off = k+1, 0
		}
		var chunk []byte
		if len(parts[k])-off >= n {
			chunk = parts[k][off : off+n]
			off += n
		} else {
			if cap(buf) < n {
				buf = make([]byte, 0, n)
			}
			buf = buf[:0]
			for len(buf) < n {
				for off == len(parts[k]) {
					k, off = k+1, 0
				}
				take := min(n-len(buf), len(parts[k])-off)
				buf = append(buf, parts[k][off:off+take]...)
				off += take
			}
			chunk = buf
		}
		if err := emit(chunkPart{id, i, count, total}.String(), chunk); err != nil {
			return err
		}
	}
	if scratch != nil && cap(buf) <= maxScratch {
		*scratch = buf
	}
	return nil
}

// reassemble adds one chunk and returns the whole message once its last
// part is in, or nil while parts are missing or when the part is dropped.
// Parts of one message come from one publisher on one subject, so NATS
// delivers them in order.
func (c *Conn) reassemble(m *nats.Msg, value string) []byte {
	h, err := parseChunkHeader(value, c.maxMessage)
	if err != nil {
		c.drop(DropChunk, m.Subject, "%v", err)
		return nil
	}
	p := c.partials[h.id]
	switch {
	case p == nil:
		if err := h.checkFirst(len(m.Data)); err != nil {
			c.drop(DropChunk, m.Subject, "message %s: %v", h.id, err)
			return nil
		}
		if h.count == 1 {
			return m.Data
		}
		p = &partial{subject: m.Subject, count: h.count, total: h.total, partLen: len(m.Data), started: time.Now()}
	case p.discard:
		if h.index == p.count-1 {
			c.forget(h.id, p)
		}
		return nil
	default:
		if err := p.checkNext(m.Subject, h, len(m.Data)); err != nil {
			c.discard(h.id, p, h.index, DropChunk, err)
			return nil
		}
	}
	charge := p.chargeAfter(h.id, len(m.Data))
	if c.held+charge-p.charge > c.maxReassembly && len(c.partials) > 0 {
		c.expirePartials(time.Now())
		if h.index > 0 && c.partials[h.id] != p {
			return nil // it was among the expired
		}
	}
	if c.held+charge-p.charge > c.maxReassembly {
		why := fmt.Errorf("%d bytes would pass the reassembly limit of %d (held now: %d)", h.total, c.maxReassembly, c.held)
		if h.index > 0 {
			c.discard(h.id, p, h.index, DropChunkLimit, why)
			return nil
		}
		c.drop(DropChunkLimit, m.Subject, "message %s: %v", h.id, why)
		// Its later parts are swallowed, if even that much still fits.
		if stub := partialOverhead + len(h.id); c.held+stub <= c.maxReassembly {
			p.charge, p.discard = stub, true
			c.partials[h.id] = p
			c.held += stub
		}
		return nil
	}
	if h.index == 0 {
		c.partials[h.id] = p
	}
	c.held += charge - p.charge
	p.charge = charge
	p.add(m.Data)
	if p.next < p.count {
		return nil
	}
	c.forget(h.id, p)
	return p.buf
}

// discard drops the message p, which part index did not fit: its memory
// is freed now, and its later parts are swallowed.
func (c *Conn) discard(id string, p *partial, index int, kind DropKind, why error) {
	c.drop(kind, p.subject, "message %s: %v", id, why)
	if index == p.count-1 {
		c.forget(id, p)
		return
	}
	c.held -= p.charge - (partialOverhead + len(id))
	p.charge = partialOverhead + len(id)
	p.parts, p.buf, p.discard = nil, nil, true
}

func (c *Conn) forget(id string, p *partial) {
	delete(c.partials, id)
	c.held -= p.charge
}

// expirePartials drops the messages still incomplete PartialTTL after
// their first part.
func (c *Conn) expirePartials(now time.Time) {
	for id, p := range c.partials {
		if now.Sub(p.started) > PartialTTL {
			if !p.discard {
				c.drop(DropChunkExpired, p.subject, "message %s: %d of %d parts after %s", id, p.next, p.count, PartialTTL)
			}
			c.forget(id, p)
		}
	}
}
