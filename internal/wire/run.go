package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Runs. While a burst to one subject lasts, a sender packs its messages
// into one frame of kind KindRun, numbered as a run (Seq..Seq+n-1), so that
// stamping, sequencing and routing are paid once per run, not once per
// message. The run frame's payload is the messages, one after the other:
//
//	[uvarint header length][header][uvarint payload length][payload]
//
// where a header length of 0 means "the header of the message before":
// a burst of calls to one endpoint repeats no header at all. The inner
// headers are unsequenced (the run is sequenced as a whole).

// MaxRun bounds the messages of a run.
const MaxRun = 1 << 16

// RunWriter packs messages into a run. A RunWriter is used by one
// goroutine at a time; Reset makes it empty for the next run.
type RunWriter struct {
	buf     []byte
	n       int
	hdr     []byte // the header of the last message added
	scratch []byte
}

// Add appends a message: its header h and its payload, as parts (a
// Writer's Parts).
func (r *RunWriter) Add(h *Header, payload [][]byte) {
	r.scratch = h.appendTo(r.scratch[:0])
	if r.n > 0 && bytes.Equal(r.scratch, r.hdr) {
		r.buf = append(r.buf, 0)
	} else {
		r.buf = binary.AppendUvarint(r.buf, uint64(len(r.scratch)))
		r.buf = append(r.buf, r.scratch...)
		r.hdr = append(r.hdr[:0], r.scratch...)
	}
	size := 0
	for _, p := range payload {
		size += len(p)
	}
	r.buf = binary.AppendUvarint(r.buf, uint64(size))
	for _, p := range payload {
		r.buf = append(r.buf, p...)
	}
	r.n++
}

// Len is the run's size in bytes; Count its messages.
func (r *RunWriter) Len() int   { return len(r.buf) }
func (r *RunWriter) Count() int { return r.n }

// Bytes is the run, valid until the next Add or Reset.
func (r *RunWriter) Bytes() []byte { return r.buf }

// Reset empties the run, keeping its buffer unless it grew past max
// bytes.
func (r *RunWriter) Reset(max int) {
	if cap(r.buf) > max {
		r.buf = nil
	}
	r.buf, r.n = r.buf[:0], 0
}

// Run reads the messages of a KindRun frame, in order.
type Run struct {
	rest []byte
	prev Header
	ok   bool // prev holds a header
}

// CountRun checks the framing of a run (payload) and counts its messages,
// reading no header: a run cut short, with bytes left over, with a first
// message that repeats a header before it, or of more than MaxRun
// messages is an error wrapping ErrDecode.
func CountRun(payload []byte) (int, error) {
	b, n := payload, 0
	for len(b) > 0 {
		if n == MaxRun {
			return 0, fmt.Errorf("%w: a run of more than %d messages", ErrDecode, MaxRun)
		}
		for field := 0; field < 2; field++ {
			size, k := binary.Uvarint(b)
			if k <= 0 || size > uint64(len(b)-k) || field == 0 && size > MaxHeader {
				return 0, fmt.Errorf("%w: run message %d: length %d in %d bytes", ErrDecode, n+1, size, len(b))
			}
			if field == 0 && size == 0 && n == 0 {
				return 0, fmt.Errorf("%w: run message 1 repeats a header", ErrDecode)
			}
			b = b[k+int(size):]
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: an empty run", ErrDecode)
	}
	return n, nil
}

// ReadRun starts reading a run whose framing CountRun checked.
func ReadRun(payload []byte) Run { return Run{rest: payload} }

// Next returns the next message of the run: its frame (the header, and
// the payload in place), or ok false at the end. A header that cannot be
// read is an error for that message (and the ones that repeat it); the
// run goes on after it.
func (r *Run) Next() (f Frame, ok bool, err error) {
	if len(r.rest) == 0 {
		return f, false, nil
	}
	hlen, k := binary.Uvarint(r.rest) // checked by CountRun
	hdr := r.rest[k : k+int(hlen)]
	r.rest = r.rest[k+int(hlen):]
	plen, k := binary.Uvarint(r.rest)
	f.Payload = r.rest[k : k+int(plen) : k+int(plen)]
	r.rest = r.rest[k+int(plen):]
	if hlen > 0 {
		r.ok = false
		if err := r.prev.read(hdr); err != nil {
			return f, true, fmt.Errorf("%w: run header: %v", ErrDecode, err)
		}
		if r.prev.Seq != 0 {
			return f, true, fmt.Errorf("%w: a sequenced header in a run", ErrDecode)
		}
		r.ok = true
	}
	if !r.ok {
		return f, true, fmt.Errorf("%w: run header: repeats one that could not be read", ErrDecode)
	}
	f.Header = r.prev
	return f, true, nil
}
