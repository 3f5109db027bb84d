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
	// KindTail, on a subject that went quiet: the sender's last sequence
	// number on it (Seq), so that a receiver that lost the last messages
	// asks for them. No payload.
	KindTail uint8 = 4
	// KindResend, to a proc's subject: a frame sent again on request;
	// Target is the subject it was first sent on (its key), the payload
	// the whole original frame.
	KindResend uint8 = 5
	// KindRun, on a proc's or a mesh's subject: a run of messages to it,
	// numbered Seq, Seq+1, ... under one header; the payload holds them
	// (see Run).
	KindRun uint8 = 6
	// KindNak, to a sender's subject, from ReplyTo: send again the frames
	// on subject Target (a key) that hold the numbers the payload names
	// (a Span). With FlagMissing it is the sender's answer instead: it no
	// longer holds those.
	KindNak uint8 = 7
	// KindAck, to a sender's subject, from ReplyTo: the receiver has
	// every message on each subject up to its number (the payload: Acks).
	KindAck uint8 = 8
	// KindRelease, to a sender's subject, from ReplyTo: the receiver is
	// done with the payload the sender holds for it out of band (the
	// payload: its id, a msgpack unsigned integer).
	KindRelease uint8 = 9
	// NumKinds bounds the kinds.
	NumKinds = 10
)

// Header flags: bits of a Header's Flags.
const (
	FlagError     uint8 = 1 << iota // the payload is an error reply, not a value
	FlagLast                        // the sender will send nothing more to this port for this rank
	FlagMissing                     // KindNak: the answer "no longer held", not a request
	FlagOutOfBand                   // the payload is not here: it says where to read it (a large one)
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

	// Sequencing (internal/reliable): the sender's proc, its sequence
	// number on the subject (0: not sequenced; the three fields are then
	// not written), and its fences.
	From   string
	Seq    uint64
	Fences []Fence
}

// Fence says: before this message, the sender's messages on the subject
// Key, up to Seq.
type Fence struct {
	Key string
	Seq uint64
}

// A header has headerFields fields, or seqHeaderFields when sequenced.
const (
	headerFields    = 8
	seqHeaderFields = 11
	// MaxFences bounds the fences of a header.
	MaxFences = 4096
)

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
	if h.Seq != 0 {
		b = appendArrayLen(b, seqHeaderFields)
	} else {
		b = appendArrayLen(b, headerFields)
	}
	b = appendUint(b, uint64(h.Kind))
	b = appendString(b, h.Target)
	b = appendUint(b, h.Port)
	b = appendString(b, h.ReplyTo)
	b = appendString(b, h.Method)
	b = appendInt(b, int64(h.Rank))
	b = appendUint(b, uint64(h.Flags))
	if h.Region == nil {
		b = append(b, 0xc0) // nil
	} else {
		b = appendArrayLen(b, len(h.Region))
		for _, v := range h.Region {
			b = appendInt(b, int64(v))
		}
	}
	if h.Seq == 0 {
		return b
	}
	b = appendString(b, h.From)
	b = appendUint(b, h.Seq)
	if len(h.Fences) == 0 {
		return append(b, 0xc0)
	}
	b = appendArrayLen(b, 2*len(h.Fences))
	for _, f := range h.Fences {
		b = appendUint(appendString(b, f.Key), f.Seq)
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
	fields := r.arrayLen()
	if fields != headerFields && fields != seqHeaderFields && r.err == nil {
		return fmt.Errorf("header has %d fields, want %d or %d", fields, headerFields, seqHeaderFields)
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
	h.Region = nil
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
	h.From, h.Seq, h.Fences = "", 0, nil
	if fields == seqHeaderFields {
		if err := h.readSeq(&r); err != nil {
			return err
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

// readSeq reads the sequencing fields.
func (h *Header) readSeq(r *mpReader) error {
	h.From = r.str()
	h.Seq = r.uint()
	n := r.arrayLen()
	switch {
	case r.err != nil:
		return r.err
	case h.Seq == 0:
		return fmt.Errorf("sequenced header with sequence number 0")
	case n > 2*MaxFences || n > len(r.b) || n > 0 && n%2 != 0:
		// A fence takes two bytes at least.
		return fmt.Errorf("%d fence numbers in %d bytes (at most %d fences)", n, len(r.b), MaxFences)
	}
	if n > 0 {
		h.Fences = make([]Fence, n/2)
		for i := range h.Fences {
			h.Fences[i] = Fence{Key: r.str(), Seq: r.uint()}
		}
	}
	return r.err
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
	seq := len(b) > 0 && b[0] == 0x90|seqHeaderFields
	if len(b) < 10 || !seq && b[0] != 0x90|headerFields || b[1] >= 0x80 || b[len(b)-1] != 0xc0 {
		return false
	}
	target, i, ok1 := fixStr(b, 2)
	port, i, ok2 := smallUint(b, i)
	replyTo, i, ok3 := fixStr(b, i)
	method, i, ok4 := fixStr(b, i)
	if !ok1 || !ok2 || !ok3 || !ok4 || i+3 > len(b) {
		return false
	}
	rank, flags := int(b[i]), b[i+1]
	if rank == 0xff {
		rank = -1
	}
	if rank >= 0x80 || flags >= 0x80 || b[i+2] != 0xc0 {
		return false
	}
	*h = Header{Kind: b[1], Target: target, Port: port, ReplyTo: replyTo, Method: method, Rank: rank, Flags: flags}
	i += 3
	if !seq {
		return i == len(b)
	}
	// The sequenced form with no fences: from, seq, nil.
	from, i, ok5 := fixStr(b, i)
	n, i, ok6 := smallUint(b, i)
	if !ok5 || !ok6 || n == 0 || i != len(b)-1 {
		return false
	}
	h.From, h.Seq = from, n
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
