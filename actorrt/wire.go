package actorrt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// A message on the bus is one frame:
//
//	[4-byte big-endian header length][msgpack header][msgpack payload]
//
// The header is what the runtime routes by; the payload (call arguments,
// a reply value, a control body) is encoded straight after it into the
// same buffer and decoded in place on arrival, so payload bytes are never
// copied by the runtime on either side.

// Message kinds.
const (
	kindActor   uint8 = 1 // to a mesh subject: call an endpoint on the members in the region
	kindPort    uint8 = 2 // to a proc subject: a value (or error) for a port
	kindControl uint8 = 3 // to a proc subject: spawn, stop, ... (method names the op)
)

// Header flags.
const (
	flagError uint8 = 1 << iota // the payload is a wireError, not a value
	flagLast                    // the sender will send nothing more to this port for this rank
)

type header struct {
	kind    uint8
	target  string // kindActor: mesh id
	port    uint64 // kindPort: destination port; otherwise the reply port (0: none)
	replyTo string // the proc that owns the reply port
	method  string // kindActor: endpoint name; kindControl: op
	rank    int    // kindPort: the replier's message rank; -1 when none
	flags   uint8
	region  *region // kindActor: the selected region; nil for the whole mesh
}

const headerFields = 8

// appendTo appends the header as a msgpack array.
func (h *header) appendTo(b []byte) []byte {
	b = appendArrayLen(b, headerFields)
	b = appendUint(b, uint64(h.kind))
	b = appendString(b, h.target)
	b = appendUint(b, h.port)
	b = appendString(b, h.replyTo)
	b = appendString(b, h.method)
	b = appendInt(b, int64(h.rank))
	b = appendUint(b, uint64(h.flags))
	if h.region == nil {
		return append(b, 0xc0) // nil
	}
	r := h.region
	b = appendArrayLen(b, 3*len(r.start))
	for i := range r.start {
		k := int64(0)
		if r.kept[i] {
			k = 1
		}
		b = appendInt(appendInt(appendInt(b, int64(r.start[i])), int64(r.size[i])), k)
	}
	return b
}

// wireRegion is a region as sent: start, size and kept per base dimension.
// The receiver joins it to the base extent it knows for the mesh.
type wireRegion []int

// Limits of a frame's header, checked before anything is allocated.
const (
	// maxHeader bounds the header's length: names, ids and a region of
	// up to maxRegionDims dimensions fit many times over.
	maxHeader = 16 << 10
	// maxRegionDims bounds the dimensions of a region in a header.
	maxRegionDims = 256
)

// read parses a header. Its strings share data. Every field must have its
// type and range, and the header must end where its length says.
func (h *header) read(data []byte) (wireRegion, error) {
	r := mpReader{b: data}
	if n := r.arrayLen(); n != headerFields && r.err == nil {
		return nil, fmt.Errorf("header has %d fields, want %d", n, headerFields)
	}
	h.kind = r.uint8()
	h.target = r.str()
	h.port = r.uint()
	h.replyTo = r.str()
	h.method = r.str()
	rank := r.int()
	h.flags = r.uint8()
	m := r.arrayLen()
	switch {
	case r.err != nil:
		return nil, r.err
	case rank < -1 || rank > math.MaxInt32:
		return nil, fmt.Errorf("rank %d", rank)
	case m > 3*maxRegionDims || m > len(r.b):
		// Each number takes a byte at least.
		return nil, fmt.Errorf("region of %d numbers in %d bytes (at most %d dimensions)", m, len(r.b), maxRegionDims)
	case m > 0 && m%3 != 0:
		return nil, fmt.Errorf("region has %d numbers, want a multiple of 3", m)
	}
	h.rank = int(rank)
	var wr wireRegion
	if m >= 0 {
		wr = make(wireRegion, m)
		for i := range wr {
			v := r.int()
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("region number %d", v)
			}
			wr[i] = int(v)
		}
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case len(r.b) != 0:
		return nil, fmt.Errorf("%d bytes after the header's fields", len(r.b))
	}
	return wr, nil
}

// toRegion joins a wire region to the mesh's base extent.
func (wr wireRegion) toRegion(base Extent) (region, error) {
	if len(wr) != 3*len(base.dims) {
		return region{}, fmt.Errorf("%w: region of %d dimensions for %v", ErrDecode, len(wr)/3, base)
	}
	r := region{base: base, start: make([]int, len(base.dims)), size: make([]int, len(base.dims)), kept: make([]bool, len(base.dims))}
	for i, d := range base.dims {
		r.start[i], r.size[i], r.kept[i] = wr[3*i], wr[3*i+1], wr[3*i+2] == 1
		if r.start[i] < 0 || r.size[i] < 1 || r.start[i]+r.size[i] > d.Size || wr[3*i+2]&^1 != 0 {
			return region{}, fmt.Errorf("%w: region %v of %v", ErrDecode, []int(wr), base)
		}
	}
	return r, nil
}

// frameWriter builds one frame in a pooled buffer: the header by hand,
// the payload with enc, which appends to the same buffer. A frame may not
// pass limit bytes (the bus's largest message): the first write that
// would is refused, before its bytes are copied, and the encoder stops
// with errFrameFull. So a value too large to send is never copied whole.
type frameWriter struct {
	buf   []byte
	enc   *msgpack.Encoder
	limit int
	full  bool // a write was refused
}

var errFrameFull = errors.New("frame full")

var errExtQuirk = errors.New("msgpack: an extension whose data is a map, where a map is decoded (msgpack/v5 would read that map unchecked)")

func (w *frameWriter) fits(n int) bool {
	if len(w.buf)+n > w.limit {
		w.full = true
		return false
	}
	return true
}

func (w *frameWriter) Write(p []byte) (int, error) {
	if !w.fits(len(p)) {
		return 0, errFrameFull
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *frameWriter) WriteByte(c byte) error {
	if !w.fits(1) {
		return errFrameFull
	}
	w.buf = append(w.buf, c)
	return nil
}

func (w *frameWriter) WriteString(s string) (int, error) {
	if !w.fits(len(s)) {
		return 0, errFrameFull
	}
	w.buf = append(w.buf, s...)
	return len(s), nil
}

var framePool = sync.Pool{New: func() any {
	w := &frameWriter{buf: make([]byte, 0, 256)}
	w.enc = msgpack.NewEncoder(w)
	w.enc.UseCompactInts(true)
	return w
}}

// newFrame starts a frame with header h, at most limit bytes in all; the
// payload is then encoded with w.enc. Release it with w.free once
// published.
func newFrame(h *header, limit int) (*frameWriter, error) {
	w := framePool.Get().(*frameWriter)
	w.buf = h.appendTo(append(w.buf[:0], 0, 0, 0, 0))
	w.limit, w.full = limit, false
	n := len(w.buf) - 4
	if n > maxHeader || len(w.buf) > limit {
		w.free()
		return nil, fmt.Errorf("actorrt: a header of %d bytes (target %.40q, method %.40q): the limit is %d", n, h.target, h.method, min(maxHeader, limit))
	}
	binary.BigEndian.PutUint32(w.buf[:4], uint32(n))
	return w, nil
}

// tooLarge is the error for an encoding stopped by the frame's limit, or
// nil if err is another.
func (w *frameWriter) tooLarge(what string, err error) error {
	if !w.full {
		return nil
	}
	return fmt.Errorf("%w: %s: over the bus's largest message of %d bytes", ErrTooLarge, what, w.limit)
}

func (w *frameWriter) bytes() []byte { return w.buf }

func (w *frameWriter) free() {
	if cap(w.buf) > 1<<20 {
		return // do not keep huge buffers alive in the pool
	}
	framePool.Put(w)
}

// marshalLimited encodes v as msgpack.Marshal does, but fails with
// ErrTooLarge as soon as the encoding would pass limit bytes.
func marshalLimited(v any, limit int, what string) ([]byte, error) {
	w := &frameWriter{limit: limit}
	w.enc = msgpack.GetEncoder()
	defer msgpack.PutEncoder(w.enc)
	w.enc.Reset(w)
	if err := w.enc.Encode(v); err != nil {
		if tl := w.tooLarge(what, err); tl != nil {
			return nil, tl
		}
		return nil, err
	}
	return w.buf, nil
}

// frame is a received message split into its header and payload. payload
// aliases the received bytes.
type frame struct {
	h       header
	region  wireRegion
	payload []byte
}

func parseFrame(data []byte) (frame, error) {
	var f frame
	if len(data) < 4 {
		return f, fmt.Errorf("%w: frame of %d bytes", ErrDecode, len(data))
	}
	n := binary.BigEndian.Uint32(data)
	if n > maxHeader || int(n) > len(data)-4 {
		return f, fmt.Errorf("%w: header length %d in a frame of %d bytes (at most %d)", ErrDecode, n, len(data), maxHeader)
	}
	wr, err := f.h.read(data[4 : 4+n])
	if err != nil {
		return f, fmt.Errorf("%w: header: %v", ErrDecode, err)
	}
	f.region = wr
	f.payload = data[4+n:]
	return f, nil
}

// decodePayload runs fn with a decoder over p, once p is known to hold
// only lengths that fit its bytes (checkMsgpack). types are the Go types
// fn decodes into.
func decodePayload(p []byte, types []reflect.Type, fn func(*msgpack.Decoder) error) error {
	quirk, err := checkMsgpack(p)
	if err != nil {
		return err
	}
	if quirk && hasMap(types) {
		return errExtQuirk
	}
	d := msgpack.GetDecoder()
	defer msgpack.PutDecoder(d)
	d.Reset(bytes.NewReader(p))
	return fn(d)
}

// validID reports whether s can name a proc or a mesh: dot-separated
// tokens of letters, digits, '_' and '-'. Ids become NATS subject tokens,
// so a wildcard, a space or an empty token must not get in.
func validID(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	dot := true // at a token's start
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if dot {
				return false
			}
			dot = true
		case c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			dot = false
		default:
			return false
		}
	}
	return !dot
}

// wireError is an error as it travels in a port message.
type wireError struct {
	Sentinel string      `msgpack:"s"` // name of a sentinel of this package, for errors.Is after the trip
	Actor    *ActorError `msgpack:"a"`
	Message  string      `msgpack:"m"`
}
