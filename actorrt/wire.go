package actorrt

import (
	"bytes"
	"encoding/binary"
	"fmt"
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

func (h *header) encode(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(headerFields); err != nil {
		return err
	}
	e.EncodeUint8(h.kind)
	e.EncodeString(h.target)
	e.EncodeUint64(h.port)
	e.EncodeString(h.replyTo)
	e.EncodeString(h.method)
	e.EncodeInt(int64(h.rank))
	e.EncodeUint8(h.flags)
	if h.region == nil {
		return e.EncodeNil()
	}
	r := h.region
	e.EncodeArrayLen(3 * len(r.start))
	for i := range r.start {
		e.EncodeInt(int64(r.start[i]))
		e.EncodeInt(int64(r.size[i]))
		k := int64(0)
		if r.kept[i] {
			k = 1
		}
		e.EncodeInt(k)
	}
	return nil
}

// wireRegion is a region as sent: start, size and kept per base dimension.
// The receiver joins it to the base extent it knows for the mesh.
type wireRegion []int

func (h *header) decode(d *msgpack.Decoder) (wireRegion, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n != headerFields {
		return nil, fmt.Errorf("header has %d fields, want %d", n, headerFields)
	}
	if h.kind, err = d.DecodeUint8(); err != nil {
		return nil, err
	}
	if h.target, err = d.DecodeString(); err != nil {
		return nil, err
	}
	if h.port, err = d.DecodeUint64(); err != nil {
		return nil, err
	}
	if h.replyTo, err = d.DecodeString(); err != nil {
		return nil, err
	}
	if h.method, err = d.DecodeString(); err != nil {
		return nil, err
	}
	if h.rank, err = d.DecodeInt(); err != nil {
		return nil, err
	}
	if h.flags, err = d.DecodeUint8(); err != nil {
		return nil, err
	}
	m, err := d.DecodeArrayLen()
	if err != nil || m < 0 {
		return nil, err
	}
	if m%3 != 0 {
		return nil, fmt.Errorf("region has %d numbers, want a multiple of 3", m)
	}
	wr := make(wireRegion, m)
	for i := range wr {
		if wr[i], err = d.DecodeInt(); err != nil {
			return nil, err
		}
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
		if r.start[i] < 0 || r.size[i] < 1 || r.start[i]+r.size[i] > d.Size {
			return region{}, fmt.Errorf("%w: region %v of %v", ErrDecode, []int(wr), base)
		}
	}
	return r, nil
}

// frameWriter builds one frame in a pooled buffer.
type frameWriter struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var framePool = sync.Pool{New: func() any {
	w := &frameWriter{}
	w.enc = msgpack.NewEncoder(&w.buf)
	w.enc.UseCompactInts(true)
	return w
}}

// newFrame starts a frame with header h; the payload is then encoded with
// w.enc. Release it with w.free once published.
func newFrame(h *header) (*frameWriter, error) {
	w := framePool.Get().(*frameWriter)
	w.buf.Reset()
	w.buf.Write([]byte{0, 0, 0, 0})
	if err := h.encode(w.enc); err != nil {
		w.free()
		return nil, fmt.Errorf("actorrt: encode header: %w", err)
	}
	binary.BigEndian.PutUint32(w.buf.Bytes()[:4], uint32(w.buf.Len()-4))
	return w, nil
}

func (w *frameWriter) bytes() []byte { return w.buf.Bytes() }

func (w *frameWriter) free() {
	if w.buf.Cap() > 1<<20 {
		return // do not keep huge buffers alive in the pool
	}
	framePool.Put(w)
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
	n := int(binary.BigEndian.Uint32(data))
	if n > len(data)-4 {
		return f, fmt.Errorf("%w: header length %d in a frame of %d bytes", ErrDecode, n, len(data))
	}
	d := msgpack.GetDecoder()
	defer msgpack.PutDecoder(d)
	d.Reset(bytes.NewReader(data[4 : 4+n]))
	wr, err := f.h.decode(d)
	if err != nil {
		return f, fmt.Errorf("%w: header: %v", ErrDecode, err)
	}
	f.region = wr
	f.payload = data[4+n:]
	return f, nil
}

// decodePayload runs fn with a decoder over p.
func decodePayload(p []byte, fn func(*msgpack.Decoder) error) error {
	d := msgpack.GetDecoder()
	defer msgpack.PutDecoder(d)
	d.Reset(bytes.NewReader(p))
	return fn(d)
}

// wireError is an error as it travels in a port message.
type wireError struct {
	Sentinel string      `msgpack:"s"` // name of a sentinel of this package, for errors.Is after the trip
	Actor    *ActorError `msgpack:"a"`
	Message  string      `msgpack:"m"`
}
