package wire

import (
	"encoding/binary"
	"math"
)

// Values reads plain values from a payload by hand: an array header,
// []byte, string, integers, float64 and bool. It is the receive side's
// fast path for the common case (an argument list of a few such values, a
// reply of one), which needs neither a decoder nor reflection.
//
// Values reads only the usual encodings, and where it reads a value it
// gives exactly what msgpack/v5 would. Anything else (another encoding,
// a length past the end, bytes left over) is not an error: ok is false,
// and the caller decodes the payload the general way (DecodePayload),
// which decides what it means. Every length is checked against the bytes
// present before anything is allocated.
//
// The zero Values reads nothing. A Values is used by one goroutine.
type Values struct {
	r mpReader
	// share: Bytes may return a []byte that shares the payload instead of
	// a copy (see ReadValues).
	share bool
}

// ShareMin is the shortest []byte that Values returns in place rather
// than copied, when sharing is allowed: below it a copy costs less than
// the payload it would keep alive.
const ShareMin = 64 << 10

// ReadValues starts reading p. With share, a []byte of ShareMin bytes or
// more is returned in place, sharing p (capacity cut at its end, so that
// an append cannot reach the next value): the caller passes share only
// when p belongs to the one receiver of those bytes, which may then keep
// and modify them.
func ReadValues(p []byte, share bool) Values { return Values{r: mpReader{b: p}, share: share} }

// ok reports whether every read so far succeeded.
func (v *Values) ok() bool { return v.r.err == nil }

// End reports whether every read succeeded and nothing is left.
func (v *Values) End() bool { return v.r.err == nil && len(v.r.b) == 0 }

// miss makes every later read fail: the payload is not one Values reads.
func (v *Values) miss() { v.r.fail(errShort) }

// ArrayLen reads an array header (not nil).
func (v *Values) ArrayLen() (int, bool) {
	if len(v.r.b) > 0 && v.r.b[0] == 0xc0 {
		v.miss()
		return 0, false
	}
	n := v.r.arrayLen()
	return n, v.ok()
}

// Int reads an integer, as msgpack/v5's DecodeInt64 does (an unsigned
// 64-bit value wraps).
func (v *Values) Int() (int64, bool) {
	n := v.r.int()
	return n, v.ok()
}

// Float64 reads a float64 or a float32.
func (v *Values) Float64() (float64, bool) {
	switch c := v.r.code(); c {
	case 0xcb:
		return math.Float64frombits(binary.BigEndian.Uint64(v.r.next(8))), v.ok()
	case 0xca:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(v.r.next(4)))), v.ok()
	}
	v.miss()
	return 0, false
}

// Bool reads true or false.
func (v *Values) Bool() (bool, bool) {
	switch v.r.code() {
	case 0xc3:
		return true, v.ok()
	case 0xc2:
		return false, v.ok()
	}
	v.miss()
	return false, false
}

// raw reads the body of a string or binary value, or nil (isNil).
func (v *Values) raw() (b []byte, isNil, ok bool) {
	if len(v.r.b) == 0 {
		v.miss()
		return nil, false, false
	}
	c := v.r.b[0]
	var n int
	switch {
	case c == 0xc0:
		v.r.next(1)
		return nil, true, true
	case c&0xe0 == 0xa0:
		v.r.next(1)
		n = int(c & 0x1f)
	case c == 0xc4 || c == 0xd9:
		v.r.next(1)
		n = int(v.r.next(1)[0])
	case c == 0xc5 || c == 0xda:
		v.r.next(1)
		n = int(binary.BigEndian.Uint16(v.r.next(2)))
	case c == 0xc6 || c == 0xdb:
		v.r.next(1)
		n = int(binary.BigEndian.Uint32(v.r.next(4)))
	default:
		v.miss()
		return nil, false, false
	}
	b = v.r.next(n)
	return b, false, v.ok()
}

// Bytes reads a []byte as msgpack/v5 decodes one: from binary or string,
// nil from nil, an empty non-nil slice from an empty value.
func (v *Values) Bytes() ([]byte, bool) {
	b, isNil, ok := v.raw()
	switch {
	case !ok:
		return nil, false
	case isNil:
		return nil, true
	case v.share && len(b) >= ShareMin:
		return b[:len(b):len(b)], true
	}
	return append(make([]byte, 0, len(b)), b...), true
}

// String reads a string from string or binary; nil is "".
func (v *Values) String() (string, bool) {
	b, _, ok := v.raw()
	if !ok {
		return "", false
	}
	return string(b), true
}
