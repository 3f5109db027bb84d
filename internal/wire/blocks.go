package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"reflect"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// Numeric blocks. msgpack/v5 writes a []float32 element by element, each
// behind a code of its own, and reads it back the same way: 64 MiB of
// weights took 150 times as long as the same bytes as a []byte. A slice or
// array of fixed-size numbers (bool, int8..int64, uint16..uint64, float32,
// float64), or a named type over one, travels instead as one msgpack
// extension of type BlockExt (always the ext32 form):
//
//	[0xc9][length: 4 bytes][BlockExt][k: 1 byte, 0..7][k zero bytes][elements]
//
// the elements little-endian, one after the other. k pads the elements to
// a multiple of their alignment from the start of the payload, so that
// where the payload lands on an aligned address (one read out of band
// does) the receiver can use the elements in place. A nil slice is msgpack
// nil.
//
// On a little-endian machine the elements' memory is those bytes: the
// encoder shares a large block into the frame as it shares a []byte
// (EncodeBytes), and the decoder refers to the block in place where the
// payload is the decoded values' alone and the block is large and aligned
// (DecodeSharedFor), or reads it into the new slice, one copy. On a
// big-endian machine both convert element by element. A block's length
// must be a whole number of elements (and, for an array, exactly its
// length); a bool is the byte 0 or 1. The decoder also reads a block as
// msgpack binary (no padding), and the element-by-element form (a msgpack
// array), so a value written before blocks decodes the same.
//
// []uint8 and [N]uint8 are not blocks here: msgpack/v5 already writes
// them as binary. int and uint are not either: their size is the
// machine's.

// BlockExt is the msgpack extension type of a numeric block.
const BlockExt = 66

// nativeLittle tells whether this machine stores numbers little-endian.
var nativeLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// IsBlock tells whether values of t travel as a numeric block.
func IsBlock(t reflect.Type) bool {
	if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
		return false
	}
	return blockElemSize(t.Elem()) > 0
}

// blockElemSize is the size of one element of a block of e, or 0 when e
// is not a block's element.
func blockElemSize(e reflect.Type) int {
	switch e.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return int(e.Size())
	}
	return 0
}

// RegisterBlock gives msgpack the block codec of t (IsBlock), which must
// happen before a value of t, or of a type holding one, is first encoded
// or decoded: msgpack keeps the codec it first finds for a type.
func RegisterBlock(t reflect.Type) {
	if !IsBlock(t) {
		panic(fmt.Sprintf("wire: RegisterBlock of %s, which is not a slice or array of fixed-size numbers", t))
	}
	msgpack.Register(reflect.Zero(t).Interface(), encodeBlock, decodeBlock)
}

func init() {
	for _, v := range []any{
		[]bool(nil), []int8(nil), []int16(nil), []int32(nil), []int64(nil),
		[]uint16(nil), []uint32(nil), []uint64(nil), []float32(nil), []float64(nil),
	} {
		RegisterBlock(reflect.TypeOf(v))
	}
}

// blockBytes is the memory of v's elements (a slice, or an addressable
// array) as bytes.
func blockBytes(v reflect.Value) []byte {
	n := v.Len() * int(v.Type().Elem().Size())
	if n == 0 {
		return []byte{} // not nil: EncodeBytes writes nil for that
	}
	var p unsafe.Pointer
	if v.Kind() == reflect.Slice {
		p = v.UnsafePointer()
	} else {
		p = unsafe.Pointer(v.UnsafeAddr())
	}
	return unsafe.Slice((*byte)(p), n)
}

func encodeBlock(enc *msgpack.Encoder, v reflect.Value) error {
	if v.Kind() == reflect.Slice && v.IsNil() {
		return enc.EncodeNil()
	}
	if v.Kind() == reflect.Array && !v.CanAddr() {
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		v = c
	}
	e := v.Type().Elem()
	return writeBlock(enc, blockBytes(v), int(e.Size()), int(e.Align()), v.Type())
}

// writeBlock writes the block of a value of type t whose elements (size
// bytes each, aligned to align) are b in this machine's order.
func writeBlock(enc *msgpack.Encoder, b []byte, size, align int, t reflect.Type) error {
	if !nativeLittle && size > 1 {
		le := make([]byte, len(b))
		swapBlock(le, b, size)
		b = le
	}
	at := 0 // where the header goes, from the payload's start
	w, framed := enc.Writer().(*limitedBuffer)
	if framed {
		at = w.size() - w.payload
	}
	k := (align - (at+7)%align) % align
	if uint64(1+k+len(b)) > math.MaxUint32 {
		return fmt.Errorf("a %s of %d bytes: a block holds at most 4 GiB", t, len(b))
	}
	if framed && !w.fits(7+k+len(b)) {
		return errFrameFull
	}
	var head [7 + 7]byte
	head[0] = 0xc9
	binary.BigEndian.PutUint32(head[1:], uint32(1+k+len(b)))
	head[5], head[6] = BlockExt, byte(k)
	if !framed {
		// A copy: head passed to an unknown writer would move to the
		// heap on every path.
		if _, err := enc.Writer().Write(append([]byte(nil), head[:7+k]...)); err != nil {
			return err
		}
		_, err := enc.Writer().Write(b)
		return err
	}
	if _, err := w.Write(head[:7+k]); err != nil {
		return err
	}
	if len(b) >= ShareMin {
		return w.share(b)
	}
	_, err := w.Write(b)
	return err
}

// swapBlock copies src to dst reversing the bytes of each size-byte
// element: little-endian to big-endian and back.
func swapBlock(dst, src []byte, size int) {
	switch size {
	case 2:
		for i := 0; i+2 <= len(src); i += 2 {
			binary.LittleEndian.PutUint16(dst[i:], bits.ReverseBytes16(binary.LittleEndian.Uint16(src[i:])))
		}
	case 4:
		for i := 0; i+4 <= len(src); i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], bits.ReverseBytes32(binary.LittleEndian.Uint32(src[i:])))
		}
	case 8:
		for i := 0; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], bits.ReverseBytes64(binary.LittleEndian.Uint64(src[i:])))
		}
	default:
		copy(dst, src)
	}
}

// blockChunk is how much of a block the decoder allocates ahead of the
// bytes it has read, where it cannot see how many bytes remain.
const blockChunk = 1 << 20

func decodeBlock(d *msgpack.Decoder, v reflect.Value) error {
	t := v.Type()
	if !v.CanSet() {
		return fmt.Errorf("cannot decode a %s into a value that is not settable", t)
	}
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case c == 0xc0: // nil
		if err := d.DecodeNil(); err != nil {
			return err
		}
		v.SetZero()
		return nil
	case c&0xf0 == 0x90 || c == 0xdc || c == 0xdd: // an array: the form before blocks
		return decodeElements(d, v)
	}
	n, err := blockLen(d, c)
	if err != nil {
		return fmt.Errorf("a %s: %v", t, err)
	}
	size := int(t.Elem().Size())
	if n < 0 || n%size != 0 {
		return fmt.Errorf("a %s: a block of %d bytes is not a whole number of %d-byte elements", t, n, size)
	}
	if v.Kind() == reflect.Array && n != v.Len()*size {
		return fmt.Errorf("a %s: a block of %d bytes, want %d", t, n, v.Len()*size)
	}
	if r, ok := d.Buffered().(interface{ Len() int }); ok && n > r.Len() {
		return fmt.Errorf("a %s: a block of %d bytes, %d left: %w", t, n, r.Len(), errShort)
	}
	if v.Kind() == reflect.Slice && shareBlock(d, v, n) {
		return nil
	}
	if v.Kind() == reflect.Slice {
		if err := readSlice(d, v, n/size); err != nil {
			return fmt.Errorf("a %s: %v", t, err)
		}
	} else if err := d.ReadFull(blockBytes(v)); err != nil {
		return fmt.Errorf("a %s: %v", t, err)
	}
	return fromLittle(v, t)
}

// blockLen reads the head of a block (an extension of type BlockExt with
// its padding, or binary), c its first byte, and returns the length of
// the elements that follow.
func blockLen(d *msgpack.Decoder, c byte) (int, error) {
	if !isExt(c) {
		return d.DecodeBytesLen()
	}
	id, n, err := d.DecodeExtHeader()
	if err != nil {
		return 0, err
	}
	if id != BlockExt {
		return 0, fmt.Errorf("an extension of type %d, not a block (%d)", id, BlockExt)
	}
	if n < 1 {
		return 0, fmt.Errorf("a block extension of %d bytes, without its padding", n)
	}
	var pad [8]byte
	if err := d.ReadFull(pad[:1]); err != nil {
		return 0, err
	}
	k := int(pad[0])
	if k > 7 || k > n-1 {
		return 0, fmt.Errorf("a block padded by %d bytes of %d", k, n-1)
	}
	if err := d.ReadFull(pad[:k]); err != nil {
		return 0, err
	}
	return n - 1 - k, nil
}

// shareBlock sets v to the n bytes of the block d is at, in place, if d
// reads a payload of DecodeSharedFor, the block is at least ShareMin
// bytes, this machine is little-endian and the bytes are aligned for v's
// elements; false (and nothing read) otherwise. bools are checked
// (fromLittle), so they are always copied.
func shareBlock(d *msgpack.Decoder, v reflect.Value, n int) bool {
	r, ok := d.Buffered().(*ownedReader)
	e := v.Type().Elem()
	if !ok || !r.share || !nativeLittle || n < ShareMin || e.Kind() == reflect.Bool {
		return false
	}
	at := len(r.base) - r.Len()
	b := r.base[at : at+n]
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(e.Align()) != 0 {
		return false
	}
	if _, err := r.Seek(int64(n), io.SeekCurrent); err != nil {
		return false
	}
	v.Set(reflect.SliceAt(e, p, n/int(e.Size())).Convert(v.Type()))
	return true
}

// readSlice sets v to a new slice of n elements read from d. Where d
// cannot tell how many bytes it has left, the slice grows by blockChunk as
// its bytes arrive, so that a bad length costs no more than the bytes
// that are there.
func readSlice(d *msgpack.Decoder, v reflect.Value, n int) error {
	t := v.Type()
	size := int(t.Elem().Size())
	if _, ok := d.Buffered().(interface{ Len() int }); ok || n*size <= blockChunk {
		s := reflect.MakeSlice(t, n, n)
		if err := d.ReadFull(blockBytes(s)); err != nil {
			return err
		}
		v.Set(s)
		return nil
	}
	s := reflect.MakeSlice(t, 0, blockChunk/size)
	for s.Len() < n {
		k := min(n-s.Len(), max(s.Cap()-s.Len(), blockChunk/size))
		s = reflect.AppendSlice(s, reflect.MakeSlice(t, k, k))
		if err := d.ReadFull(blockBytes(s.Slice(s.Len()-k, s.Len()))); err != nil {
			return err
		}
	}
	v.Set(s)
	return nil
}

// fromLittle turns v's elements, just read as little-endian bytes, into
// this machine's numbers, and checks a bool block's bytes.
func fromLittle(v reflect.Value, t reflect.Type) error {
	b := blockBytes(v)
	if t.Elem().Kind() == reflect.Bool {
		for i, x := range b {
			if x > 1 {
				v.SetZero()
				return fmt.Errorf("a %s: element %d is the byte %d, not a bool (0 or 1)", t, i, x)
			}
		}
		return nil
	}
	if !nativeLittle {
		swapBlock(b, b, int(t.Elem().Size()))
	}
	return nil
}

// decodeElements reads v from a msgpack array, one element at a time, as
// msgpack/v5 writes such a value without the block codec.
func decodeElements(d *msgpack.Decoder, v reflect.Value) error {
	t := v.Type()
	n, err := d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("a %s: %v", t, err)
	}
	if v.Kind() == reflect.Array {
		if n != v.Len() {
			return fmt.Errorf("a %s: an array of %d elements, want %d", t, n, v.Len())
		}
	} else {
		if r, ok := d.Buffered().(interface{ Len() int }); !ok || n > r.Len() {
			// each element takes a byte at least; unchecked, grow as they come
			if !ok {
				v.Set(reflect.MakeSlice(t, 0, 0))
				for i := 0; i < n; i++ {
					e := reflect.New(t.Elem()).Elem()
					if err := d.DecodeValue(e); err != nil {
						return fmt.Errorf("a %s: element %d: %v", t, i, err)
					}
					v.Set(reflect.Append(v, e))
				}
				return nil
			}
			return fmt.Errorf("a %s: %d elements claimed, %d bytes left: %w", t, n, r.Len(), errShort)
		}
		v.Set(reflect.MakeSlice(t, n, n))
	}
	for i := 0; i < n; i++ {
		if err := d.DecodeValue(v.Index(i)); err != nil {
			return fmt.Errorf("a %s: element %d: %v", t, i, err)
		}
	}
	return nil
}
