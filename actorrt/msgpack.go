package actorrt

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"
)

// The frame header is msgpack, written and read by hand: it is on every
// message, and the generic encoder's reflection and allocations were most
// of the per-message cost. Only the forms the header uses are here.

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v < 128:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
	}
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
	}
}

func appendString(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

var errShort = errors.New("msgpack: truncated")

// mpReader reads msgpack values from a byte slice without copying. The
// first error sticks; check err after a run of reads.
type mpReader struct {
	b   []byte
	err error
}

func (r *mpReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// zeros stands in for bytes past the end; never written.
var zeros [8]byte

func (r *mpReader) next(n int) []byte {
	if len(r.b) < n {
		r.fail(errShort)
		if n <= len(zeros) {
			return zeros[:n]
		}
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *mpReader) code() byte { return r.next(1)[0] }

// arrayLen reads an array header; -1 stands for nil.
func (r *mpReader) arrayLen() int {
	c := r.code()
	switch {
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xc0:
		return -1
	case c == 0xdc:
		return int(binary.BigEndian.Uint16(r.next(2)))
	case c == 0xdd:
		return int(binary.BigEndian.Uint32(r.next(4)))
	}
	r.fail(errors.New("msgpack: want an array"))
	return 0
}

func (r *mpReader) int() int64 {
	c := r.code()
	switch {
	case c < 0x80:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xcc:
		return int64(r.next(1)[0])
	case 0xcd:
		return int64(binary.BigEndian.Uint16(r.next(2)))
	case 0xce:
		return int64(binary.BigEndian.Uint32(r.next(4)))
	case 0xcf:
		return int64(binary.BigEndian.Uint64(r.next(8)))
	case 0xd0:
		return int64(int8(r.next(1)[0]))
	case 0xd1:
		return int64(int16(binary.BigEndian.Uint16(r.next(2))))
	case 0xd2:
		return int64(int32(binary.BigEndian.Uint32(r.next(4))))
	case 0xd3:
		return int64(binary.BigEndian.Uint64(r.next(8)))
	}
	r.fail(errors.New("msgpack: want an integer"))
	return 0
}

// str returns a string that shares the reader's bytes: it stays valid as
// long as they are not modified, which holds for a received message.
func (r *mpReader) str() string {
	c := r.code()
	var n int
	switch {
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	case c == 0xd9:
		n = int(r.next(1)[0])
	case c == 0xda:
		n = int(binary.BigEndian.Uint16(r.next(2)))
	case c == 0xdb:
		n = int(binary.BigEndian.Uint32(r.next(4)))
	default:
		r.fail(errors.New("msgpack: want a string"))
		return ""
	}
	p := r.next(n)
	if n == 0 || r.err != nil {
		return ""
	}
	return unsafe.String(&p[0], n)
}
