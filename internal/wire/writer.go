package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Writer builds one frame in a pooled buffer: the header by hand, the
// payload with Enc, which appends to the same buffer. A frame may not
// pass its limit (the largest message, WithMaxMessage): the first write that would
// is refused, before its bytes are copied, and the encoder stops with an
// error (TooLarge tells it apart). So a value too large to send is never
// copied whole. A Writer is used by one goroutine at a time.
type Writer struct {
	// Enc encodes the payload into the frame, with compact integers.
	Enc *msgpack.Encoder
	buf limitedBuffer
	one [1][]byte // Parts of an unshared frame

	// A frame started with NewPayload gets its header at Seal.
	deferred bool
	head     []byte   // the header, with its length, built by Seal
	sealed   [][]byte // Seal's parts
}

// limitedBuffer is what a frame's encoder writes to. Its bytes are b,
// unless large slices were shared into it (EncodeBytes): then they are
// the parts in shared followed by b[start:].
type limitedBuffer struct {
	b     []byte
	limit int
	named int  // the limit errors name (the whole frame's)
	full  bool // a write was refused
	// shared holds, in order, pieces of b and the slices shared between
	// them; sharedLen is their length in all.
	shared    [][]byte
	sharedLen int
	start     int
	payload   int // where the payload starts (after NewFrame's header)
	// compact: the buffer is a pooled frame's, whose encoder writes
	// compact integers (EncodeTyped relies on it).
	compact bool
}

var errFrameFull = errors.New("frame full")

// size is the frame's length so far.
func (w *limitedBuffer) size() int { return w.sharedLen + len(w.b) - w.start }

func (w *limitedBuffer) fits(n int) bool {
	if w.size()+n > w.limit {
		w.full = true
		return false
	}
	return true
}

// share adds p to the frame without copying it.
func (w *limitedBuffer) share(p []byte) error {
	if !w.fits(len(p)) {
		return errFrameFull
	}
	piece := w.b[w.start:len(w.b):len(w.b)]
	w.shared = append(w.shared, piece, p)
	w.sharedLen += len(piece) + len(p)
	w.start = len(w.b)
	return nil
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if !w.fits(len(p)) {
		return 0, errFrameFull
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *limitedBuffer) WriteByte(c byte) error {
	if !w.fits(1) {
		return errFrameFull
	}
	w.b = append(w.b, c)
	return nil
}

func (w *limitedBuffer) WriteString(s string) (int, error) {
	if !w.fits(len(s)) {
		return 0, errFrameFull
	}
	w.b = append(w.b, s...)
	return len(s), nil
}

// tooLarge is the error for an encoding stopped by the limit, or nil if
// no write was refused.
func (w *limitedBuffer) tooLarge(what string) error {
	if !w.full {
		return nil
	}
	return fmt.Errorf("%w: %s: over the largest message of %d bytes (WithMaxMessage)", ErrTooLarge, what, w.named)
}

var framePool = sync.Pool{New: func() any {
	w := &Writer{buf: limitedBuffer{b: make([]byte, 0, 256), compact: true}}
	w.Enc = msgpack.NewEncoder(&w.buf)
	w.Enc.UseCompactInts(true)
	return w
}}

// NewFrame starts a frame with header h, at most limit bytes in all; the
// payload is then encoded with w.Enc. It fails if the header alone passes
// MaxHeader or limit. h is not kept. Release the Writer with Free once its
// bytes are published.
func NewFrame(h *Header, limit int) (*Writer, error) {
	w := framePool.Get().(*Writer)
	w.buf.b = h.appendTo(append(w.buf.b[:0], 0, 0, 0, 0))
	w.buf.limit, w.buf.named, w.buf.full = limit, limit, false
	w.buf.shared, w.buf.sharedLen, w.buf.start = w.buf.shared[:0], 0, 0
	w.buf.payload = len(w.buf.b)
	n := len(w.buf.b) - 4
	if n > MaxHeader || len(w.buf.b) > limit {
		w.Free()
		// Copies of the names, so that h does not escape: a caller's
		// header and its region can stay on the caller's stack.
		target, method := strings.Clone(h.Target), strings.Clone(h.Method)
		return nil, fmt.Errorf("actorrt: a header of %d bytes (target %.40q, method %.40q): the limit is %d", n, target, method, min(MaxHeader, limit))
	}
	binary.BigEndian.PutUint32(w.buf.b[:4], uint32(n))
	return w, nil
}

// NewPayload starts a frame whose header comes last (Seal): the payload is
// encoded first, with w.Enc, so that what goes in the header may be
// decided once the payload is known to encode (a sequence number is
// then never spent on a message that is not sent). h is the header as it
// is known now: the payload may pass limit less its size and SeqRoom.
func NewPayload(h *Header, limit int) *Writer {
	w := framePool.Get().(*Writer)
	w.head = h.appendTo(append(w.head[:0], 0, 0, 0, 0))
	w.buf.b = w.buf.b[:0]
	w.buf.limit, w.buf.named, w.buf.full = max(limit-len(w.head)-SeqRoom, 0), limit, false
	w.buf.shared, w.buf.sharedLen, w.buf.start = w.buf.shared[:0], 0, 0
	w.buf.payload = 0
	w.deferred = true
	return w
}

// SeqRoom is what NewPayload keeps of a frame's limit for the sequencing
// fields Seal adds to its header (a frame at the very limit with many
// fences fails at Seal).
const SeqRoom = 64

// Seal writes the header of a frame started with NewPayload and returns
// the whole frame as parts to be sent one after the other (valid until
// Free). A header past MaxHeader, or a frame past the limit, is an error.
func (w *Writer) Seal(h *Header) ([][]byte, error) {
	w.head = h.appendTo(append(w.head[:0], 0, 0, 0, 0))
	n := len(w.head) - 4
	if n > MaxHeader || w.buf.size()+len(w.head) > w.buf.named {
		return nil, fmt.Errorf("%w: a frame of %d bytes with its header of %d (target %.40q): the limit is %d, and %d for a header",
			ErrTooLarge, w.buf.size()+len(w.head), n, h.Target, w.buf.named, MaxHeader)
	}
	binary.BigEndian.PutUint32(w.head[:4], uint32(n))
	w.sealed = append(append(w.sealed[:0], w.head), w.Parts()...)
	return w.sealed, nil
}

// AppendHeader appends h as a frame's head (its length, then the header)
// to b: a frame whose payload the caller has as bytes already (a run, a
// resent frame) is that head followed by them. A header past MaxHeader
// is an error.
func AppendHeader(b []byte, h *Header) ([]byte, error) {
	start := len(b)
	b = h.appendTo(append(b, 0, 0, 0, 0))
	n := len(b) - start - 4
	if n > MaxHeader {
		return b[:start], fmt.Errorf("%w: a header of %d bytes (target %.40q): the limit is %d", ErrTooLarge, n, h.Target, MaxHeader)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b, nil
}

// PayloadSize is the size of the payload encoded so far.
func (w *Writer) PayloadSize() int { return w.buf.size() }

// TooLarge is the error for an encoding that the frame's limit stopped
// (wrapping ErrTooLarge, naming what was encoded), or nil if err came
// from elsewhere.
func (w *Writer) TooLarge(what string, err error) error {
	if err == nil {
		return nil
	}
	return w.buf.tooLarge(what)
}

// Bytes is the frame so far, in one slice. Unless slices were shared
// into it (EncodeBytes), it aliases the Writer's buffer: valid until
// Free. Parts does without the copy.
func (w *Writer) Bytes() []byte {
	if len(w.buf.shared) == 0 {
		return w.buf.b
	}
	out := make([]byte, 0, w.buf.size())
	for _, p := range w.Parts() {
		out = append(out, p...)
	}
	return out
}

// Parts is the frame so far as slices to be sent one after the other:
// pieces of the Writer's buffer and the slices shared into it. They are
// valid until Free (and the shared ones as long as their owner leaves
// them alone).
func (w *Writer) Parts() [][]byte {
	if len(w.buf.shared) == 0 {
		w.one[0] = w.buf.b
		return w.one[:]
	}
	if w.buf.start < len(w.buf.b) {
		w.buf.shared = append(w.buf.shared, w.buf.b[w.buf.start:])
		w.buf.sharedLen += len(w.buf.b) - w.buf.start
		w.buf.start = len(w.buf.b)
	}
	return w.buf.shared
}

// Free returns the Writer to the pool; neither it nor its Bytes and Parts
// may be used after.
func (w *Writer) Free() {
	if cap(w.buf.b) > 1<<20 || cap(w.buf.shared) > 64 {
		return // do not keep huge buffers alive in the pool
	}
	clear(w.buf.shared[:cap(w.buf.shared)]) // nor what was shared
	clear(w.sealed[:cap(w.sealed)])
	w.one[0], w.deferred = nil, false
	framePool.Put(w)
}

// EncodeBytes encodes b as enc.EncodeBytes does. When enc is a frame's
// (Writer.Enc) and b is at least ShareMin bytes, b is not copied: the
// frame refers to it (Parts), and it must not change until the frame has
// been sent.
func EncodeBytes(enc *msgpack.Encoder, b []byte) error {
	w, ok := enc.Writer().(*limitedBuffer)
	if !ok || len(b) < ShareMin {
		return enc.EncodeBytes(b)
	}
	// The header of ShareMin bytes or more is bin32: 5 bytes.
	if !w.fits(5 + len(b)) {
		return errFrameFull
	}
	if err := enc.EncodeBytesLen(len(b)); err != nil {
		return err
	}
	return w.share(b)
}

// EncodeArg encodes v as enc.Encode does, sharing a large []byte as
// EncodeBytes does.
func EncodeArg(enc *msgpack.Encoder, v any) error {
	if b, ok := v.([]byte); ok {
		return EncodeBytes(enc, b)
	}
	return enc.Encode(v)
}

// MarshalLimited encodes v as msgpack.Marshal does, but fails with
// ErrTooLarge (naming what) as soon as the encoding would pass limit
// bytes.
func MarshalLimited(v any, limit int, what string) ([]byte, error) {
	buf := &limitedBuffer{limit: limit, named: limit}
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	if err := enc.Encode(v); err != nil {
		if tl := buf.tooLarge(what); tl != nil {
			return nil, tl
		}
		return nil, err
	}
	return buf.b, nil
}
