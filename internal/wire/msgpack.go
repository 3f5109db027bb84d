package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
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

func (r *mpReader) code() byte {
	if len(r.b) == 0 {
		r.fail(errShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

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
	if len(r.b) > 0 && (r.b[0] < 0x80 || r.b[0] >= 0xe0) { // fixint: most
		c := r.b[0]
		r.b = r.b[1:]
		return int64(int8(c))
	}
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

// uint reads a non-negative integer.
func (r *mpReader) uint() uint64 {
	if len(r.b) > 0 && r.b[0] == 0xcf { // above MaxInt64: int would wrap
		r.next(1)
		return binary.BigEndian.Uint64(r.next(8))
	}
	v := r.int()
	if v < 0 {
		r.fail(errors.New("msgpack: want a non-negative integer"))
		return 0
	}
	return uint64(v)
}

// uint8 reads an integer in [0, 255].
func (r *mpReader) uint8() uint8 {
	v := r.int()
	if v < 0 || v > math.MaxUint8 {
		r.fail(errors.New("msgpack: want an integer in [0, 255]"))
		return 0
	}
	return uint8(v)
}

// str returns a string that shares the reader's bytes: it stays valid as
// long as they are not modified, which holds for a received message.
func (r *mpReader) str() string {
	if len(r.b) > 1 && r.b[0]&0xe0 == 0xa0 && int(r.b[0]&0x1f) < len(r.b) { // fixstr: most
		n := int(r.b[0] & 0x1f)
		p := r.b[1 : 1+n]
		r.b = r.b[1+n:]
		return unsafe.String(unsafe.SliceData(p), n)
	}
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

// maxDepth bounds how deeply the arrays and maps of a received payload may
// nest (encoding/json's limit): the decoder recurses once per level, so a
// payload of nothing but array headers must not take the stack with it.
const maxDepth = 10000

var errDeep = errors.New("msgpack: values nest deeper than 10000")

var errExtQuirk = errors.New("msgpack: an extension whose data is a map, where a map is decoded (msgpack/v5 would read that map unchecked)")

// DecodePayload runs fn with a decoder over p, once p is known to hold
// only lengths that fit its bytes (CheckMsgpack). types are the Go types
// fn decodes into: a payload whose extensions msgpack/v5 would read as
// maps is refused where one of them holds a map.
func DecodePayload(p []byte, types []reflect.Type, fn func(*msgpack.Decoder) error) error {
	return DecodePayloadFor(nil, p, types, fn)
}

// DecodePayloadFor is DecodePayload with a decoder that carries owner:
// a value's own decoder finds it with Owner (a reference decoded from the
// wire binds to the runtime that decodes it).
func DecodePayloadFor(owner any, p []byte, types []reflect.Type, fn func(*msgpack.Decoder) error) error {
	return decodePayload(owner, p, false, types, fn)
}

// DecodeSharedFor is DecodePayloadFor for a payload that belongs to the
// values decoded from it alone: a numeric block of ShareMin bytes or
// more, suitably aligned in p, is handed out in place rather than copied
// (blocks.go), as Values hands out a []byte.
func DecodeSharedFor(owner any, p []byte, types []reflect.Type, fn func(*msgpack.Decoder) error) error {
	return decodePayload(owner, p, true, types, fn)
}

func decodePayload(owner any, p []byte, share bool, types []reflect.Type, fn func(*msgpack.Decoder) error) error {
	quirk, err := CheckMsgpack(p)
	if err != nil {
		return err
	}
	if quirk && hasMap(types) {
		return errExtQuirk
	}
	d := msgpack.GetDecoder()
	defer msgpack.PutDecoder(d)
	d.Reset(&ownedReader{Reader: bytes.NewReader(p), owner: owner, base: p, share: share})
	return fn(d)
}

// ownedReader is the bytes a decoder reads, with the owner it carries. It
// is an io.ByteScanner, so msgpack/v5 reads it as it is, and Decoder.Buffered
// gives it back.
type ownedReader struct {
	*bytes.Reader
	owner any
	base  []byte // what Reader reads
	share bool   // a large block may refer to base (DecodeSharedFor)
}

// Owner is the owner d's DecodePayloadFor was given; nil for a decoder
// made elsewhere.
func Owner(d *msgpack.Decoder) any {
	if r, ok := d.Buffered().(*ownedReader); ok {
		return r.owner
	}
	return nil
}

// CheckMsgpack walks the msgpack values in b without decoding them. It
// fails if a length claims more bytes than remain, if the arrays and maps
// claim more elements in all than there are bytes left to hold them (each
// takes at least one), or if values nest deeper than maxDepth. A payload
// that passes cannot make the decoder allocate more than its length times
// the size of the elements it decodes into (msgpack/v5 allocates a slice
// of the claimed length before reading it). It allocates nothing for the
// first 16 levels of nesting.
//
// One thing the walk cannot settle alone: decoding into a Go map,
// msgpack/v5 skips an extension header and reads a map from the
// extension's data (DecodeMapLen), data the walk took as opaque. quirk
// reports such an extension; the caller refuses it where a map is decoded.
func CheckMsgpack(b []byte) (quirk bool, err error) {
	var small [16]int
	open := small[:0] // values still to come in each open array or map
	need := 0         // the sum of open: every one takes a byte at least
	for len(b) > 0 || len(open) > 0 {
		if len(b) == 0 {
			return quirk, errShort
		}
		head, body, elems, ok := valueSize(b)
		if !ok || body > len(b)-head {
			if !ok && b[0] == 0xc1 {
				return quirk, errors.New("msgpack: reserved code 0xc1")
			}
			return quirk, errShort
		}
		if isExt(b[0]) && body > 0 && isMap(b[head]) {
			quirk = true
		}
		b = b[head+body:]
		if len(open) > 0 {
			open[len(open)-1]--
			need--
		}
		if elems > 0 {
			if elems > len(b)-need {
				return quirk, fmt.Errorf("msgpack: %d values claimed, %d bytes left", elems, len(b)-need)
			}
			if len(open) == maxDepth {
				return quirk, errDeep
			}
			open = append(open, elems)
			need += elems
		}
		for len(open) > 0 && open[len(open)-1] == 0 {
			open = open[:len(open)-1]
		}
	}
	return quirk, nil
}

func isExt(c byte) bool { return c >= 0xc7 && c <= 0xc9 || c >= 0xd4 && c <= 0xd8 }

func isMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

// hasMap reports whether a value of one of types can hold a Go map. (An
// interface decodes through DecodeInterface, which reads an extension as
// one.)
func hasMap(types []reflect.Type) bool {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type) bool
	walk = func(t reflect.Type) bool {
		if seen[t] {
			return false
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Map:
			return true
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return walk(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				if walk(t.Field(i).Type) {
					return true
				}
			}
		}
		return false
	}
	for _, t := range types {
		if walk(t) {
			return true
		}
	}
	return false
}

// valueSize reads the head of the value at b[0]: the bytes of its head,
// of the body that follows it (strings, binary, extensions, numbers) and
// the number of values it contains (arrays; maps count keys and values).
// ok is false for the reserved code, or a head cut short.
func valueSize(b []byte) (head, body, elems int, ok bool) {
	c := b[0]
	switch {
	case c <= 0x7f || c >= 0xe0: // fixint
		return 1, 0, 0, true
	case c <= 0x8f: // fixmap
		return 1, 0, 2 * int(c&0x0f), true
	case c <= 0x9f: // fixarray
		return 1, 0, int(c & 0x0f), true
	case c <= 0xbf: // fixstr
		return 1, int(c & 0x1f), 0, true
	}
	// n reads the big-endian length of k bytes after the code.
	n := func(k int) (int, bool) {
		if len(b) < 1+k {
			return 0, false
		}
		v := 0
		for _, x := range b[1 : 1+k] {
			v = v<<8 | int(x)
		}
		return v, true
	}
	var v int
	switch c {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		return 1, 0, 0, true
	case 0xc4, 0xd9: // bin8, str8
		v, ok = n(1)
		return 2, v, 0, ok
	case 0xc5, 0xda: // bin16, str16
		v, ok = n(2)
		return 3, v, 0, ok
	case 0xc6, 0xdb: // bin32, str32
		v, ok = n(4)
		return 5, v, 0, ok
	case 0xc7: // ext8: length, type, data
		v, ok = n(1)
		return 3, v, 0, ok
	case 0xc8: // ext16
		v, ok = n(2)
		return 4, v, 0, ok
	case 0xc9: // ext32
		v, ok = n(4)
		return 6, v, 0, ok
	case 0xca: // float32
		return 1, 4, 0, true
	case 0xcb: // float64
		return 1, 8, 0, true
	case 0xcc, 0xd0: // uint8, int8
		return 1, 1, 0, true
	case 0xcd, 0xd1: // 16-bit
		return 1, 2, 0, true
	case 0xce, 0xd2: // 32-bit
		return 1, 4, 0, true
	case 0xcf, 0xd3: // 64-bit
		return 1, 8, 0, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16: type, data
		return 2, 1 << (c - 0xd4), 0, true
	case 0xdc: // array16
		v, ok = n(2)
		return 3, 0, v, ok
	case 0xdd: // array32
		v, ok = n(4)
		return 5, 0, v, ok
	case 0xde: // map16
		v, ok = n(2)
		return 3, 0, 2 * v, ok
	case 0xdf: // map32
		v, ok = n(4)
		return 5, 0, 2 * v, ok
	}
	return 0, 0, 0, false // 0xc1, never used
}
