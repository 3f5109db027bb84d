package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Message kinds: a Header's Kind.
const (
	KindActor   uint8 = 1 // to a mesh subject: call an endpoint on the members in the region
	KindPort    uint8 = 2 // to a proc subject: a value (or error) for a port
	KindControl uint8 = 3 // to a proc or agent subject: spawn, stop, ... (Method names the op)
)

// Header flags: bits of a Header's Flags.
const (
	FlagError uint8 = 1 << iota // the payload is an error reply, not a value
	FlagLast                    // the sender will send nothing more to this port for this rank
)

// Header is what the runtime routes a frame by.
type Header struct {
	Kind    uint8
	Target  string // KindActor: mesh id
	Port    uint64 // KindPort: destination port; otherwise the reply port (0: none)
	ReplyTo string // the proc that owns the reply port
	Method  string // KindActor: endpoint name; KindControl: op
	Rank    int    // KindPort: the replier's message rank; -1 when none
	Flags   uint8
	// Region is the selected region of a KindActor frame, three numbers
	// per dimension of the mesh's base extent: start, size and kept (1 if
	// the dimension stays in the view, 0 if it was fixed by indexing). The
	// receiver joins it to the base extent it knows for the mesh. nil
	// selects the whole mesh.
	Region []int
}

const headerFields = 8

// Limits of a frame's header, checked before anything is allocated.
const (
	// MaxHeader bounds the header's length: names, ids and a region of
	// up to MaxRegionDims dimensions fit many times over.
	MaxHeader = 16 << 10
	// MaxRegionDims bounds the dimensions of a region in a header.
	MaxRegionDims = 256
)

// appendTo appends the header as a msgpack array.
func (h *Header) appendTo(b []byte) []byte {
	b = appendArrayLen(b, headerFields)
	b = appendUint(b, uint64(h.Kind))
	b = appendString(b, h.Target)
	b = appendUint(b, h.Port)
	b = appendString(b, h.ReplyTo)
	b = appendString(b, h.Method)
	b = appendInt(b, int64(h.Rank))
	b = appendUint(b, uint64(h.Flags))
	if h.Region == nil {
		return append(b, 0xc0) // nil
	}
	b = appendArrayLen(b, len(h.Region))
	for _, v := range h.Region {
		b = appendInt(b, int64(v))
	}
	return b
}

// read parses a header. Its strings share data. Every field must have its
// type and range, and the header must end where its length says.
func (h *Header) read(data []byte) error {
	if h.readCommon(data) {
		return nil
	}
	return h.readAny(data)
}

// readAny is read of any form.
func (h *Header) readAny(data []byte) error {
	r := mpReader{b: data}
	if n := r.arrayLen(); n != headerFields && r.err == nil {
		return fmt.Errorf("header has %d fields, want %d", n, headerFields)
	}
	h.Kind = r.uint8()
	h.Target = r.str()
	h.Port = r.uint()
	h.ReplyTo = r.str()
	h.Method = r.str()
	rank := r.int()
	h.Flags = r.uint8()
	m := r.arrayLen()
	switch {
	case r.err != nil:
		return r.err
	case rank < -1 || rank > math.MaxInt32:
		return fmt.Errorf("rank %d", rank)
	case m > 3*MaxRegionDims || m > len(r.b):
		// Each number takes a byte at least.
		return fmt.Errorf("region of %d numbers in %d bytes (at most %d dimensions)", m, len(r.b), MaxRegionDims)
	case m > 0 && m%3 != 0:
		return fmt.Errorf("region has %d numbers, want a multiple of 3", m)
	}
	h.Rank = int(rank)
	if m >= 0 {
		h.Region = make([]int, m)
		for i := range h.Region {
			v := r.int()
			if v < math.MinInt32 || v > math.MaxInt32 {
				return fmt.Errorf("region number %d", v)
			}
			h.Region[i] = int(v)
		}
	}
	switch {
	case r.err != nil:
		return r.err
	case len(r.b) != 0:
		return fmt.Errorf("%d bytes after the header's fields", len(r.b))
	}
	return nil
}

// Frame is a received message split into its header and payload.
type Frame struct {
	Header
	// Payload aliases the received bytes, as do the header's strings: they
	// stay valid as long as those bytes are not modified.
	Payload []byte
}

// Parse splits a received frame into its header and payload. It copies
// nothing but the header's region; a frame it cannot read is an error
// wrapping ErrDecode.
func Parse(data []byte) (Frame, error) {
	var f Frame
	if len(data) < 4 {
		return f, fmt.Errorf("%w: frame of %d bytes", ErrDecode, len(data))
	}
	n := binary.BigEndian.Uint32(data)
	if n > MaxHeader || int(n) > len(data)-4 {
		return f, fmt.Errorf("%w: header length %d in a frame of %d bytes (at most %d)", ErrDecode, n, len(data), MaxHeader)
	}
	if err := f.Header.read(data[4 : 4+n]); err != nil {
		return f, fmt.Errorf("%w: header: %v", ErrDecode, err)
	}
	f.Payload = data[4+n:]
	return f, nil
}

// readCommon reads, without a general reader, a header in the forms most
// take: names of fewer than 32 bytes, a kind, rank and flags of one byte,
// an unsigned port, no region. It reports false, having read nothing that
// counts, for any other form; read then takes the general way (readAny),
// which accepts everything readCommon does, as the same header.
func (h *Header) readCommon(b []byte) bool {
	if len(b) < 10 || b[0] != 0x90|headerFields || b[1] >= 0x80 || b[len(b)-1] != 0xc0 {
		return false
	}
	target, i, ok1 := fixStr(b, 2)
	port, i, ok2 := smallUint(b, i)
	replyTo, i, ok3 := fixStr(b, i)
	method, i, ok4 := fixStr(b, i)
	if !ok1 || !ok2 || !ok3 || !ok4 || i != len(b)-3 {
		return false
	}
	rank, flags := int(b[i]), b[i+1]
	if rank == 0xff {
		rank = -1
	}
	if rank >= 0x80 || flags >= 0x80 {
		return false
	}
	*h = Header{Kind: b[1], Target: target, Port: port, ReplyTo: replyTo, Method: method, Rank: rank, Flags: flags}
	return true
}

// fixStr reads a fixstr at b[i:], sharing b, and returns where it ends.
func fixStr(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i]&0xe0 != 0xa0 {
		return "", i, false
	}
	n := int(b[i] & 0x1f)
	if n == 0 || i+1+n > len(b) {
		return "", i + 1, n == 0
	}
	return unsafe.String(&b[i+1], n), i + 1 + n, true
}

// smallUint reads a positive fixint, uint8, uint16 or uint32 at b[i:].
func smallUint(b []byte, i int) (uint64, int, bool) {
	if i >= len(b) {
		return 0, i, false
	}
	switch c := b[i]; {
	case c < 0x80:
		return uint64(c), i + 1, true
	case c == 0xcc && i+2 <= len(b):
		return uint64(b[i+1]), i + 2, true
	case c == 0xcd && i+3 <= len(b):
		return uint64(binary.BigEndian.Uint16(b[i+1:])), i + 3, true
	case c == 0xce && i+5 <= len(b):
		return uint64(binary.BigEndian.Uint32(b[i+1:])), i + 5, true
	}
	return 0, i, false
}
