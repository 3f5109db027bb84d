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
//	[0xc9][length: 4 bytes][BlockExt][kind<<3 | k: 1 byte][k zero bytes][elements]
//
// the elements little-endian, one after the other. k (0..7) pads the
// elements to a multiple of their alignment from the start of the
// payload, so that where the payload lands on an aligned address (one read
// out of band does) the receiver can use the elements in place. kind names
// the elements (blockKinds: 1 bool ... 10 float64; 0, not said, is read as
// whatever the receiver wants), so that a block is never read as numbers of
// another type: a []float64 block decoded into a []float32 is an error, not
// its bytes reinterpreted. A nil slice is msgpack nil.
//
// Inside an interface value (an any argument, a map[string]any, a struct
// field of type any) a block cannot come back as itself: msgpack/v5 gives
// an interface an extension's value only as one registered type, never a
// slice. Decoding a block into an interface is therefore an error that
// names the block's type and says to declare it (anyBlock); the SDK's wire
// check refuses interface types where an endpoint is registered, so this
// is met only by msgpack used directly.
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
	if blockKind(e.Kind()) == 0 {
		return 0
	}
	return int(e.Size())
}

// blockKinds are the element kinds of blocks, by the number a block's
// header gives them (its index; 0 is not said). With at most 15 kinds the
// header byte stays below 0x80, never a msgpack map's code, which
// CheckMsgpack would take for msgpack/v5's map-in-extension quirk.
var blockKinds = [...]reflect.Kind{0, reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
	reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64}

// blockKind is the number of element kind k in a block's header, or 0
// when k is not a block's element.
func blockKind(k reflect.Kind) byte {
	for i, bk := range blockKinds[1:] {
		if bk == k {
			return byte(i + 1)
		}
	}
	return 0
}

// blockKindName names the elements of a block of header kind n.
func blockKindName(n int) string {
	if n <= 0 || n >= len(blockKinds) {
		return fmt.Sprintf("unknown kind %d", n)
	}
	return "[]" + blockKinds[n].String()
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
	msgpack.RegisterExtDecoder(BlockExt, (*anyBlock)(nil), decodeAnyBlock)
}

// anyBlock is what msgpack/v5 would decode a block into where an
// interface value is decoded, had decodeAnyBlock not refused it.
type anyBlock struct{}

// decodeAnyBlock refuses a block decoded into an interface value
// (msgpack's DecodeInterface, its extension read up to its data): it would
// come back as no slice of its type (see the comment at the top).
func decodeAnyBlock(d *msgpack.Decoder, _ reflect.Value, n int) error {
	kind, k, err := blockHeadByte(d, n)
	if err != nil {
		return err
	}
	elems := "a numeric block"
	if kind != 0 {
		elems = "a " + blockKindName(kind)
	}
	return fmt.Errorf("%s of %d bytes inside an interface value (any): msgpack decodes no typed slice into an interface, so declare the value (argument, field, map or slice element) with its own type", elems, n-1-k)
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
	head[5], head[6] = BlockExt, blockKind(t.Elem().Kind())<<3|byte(k)
	if !framed {
		// A copy: head passed to an unknown writer would move to the
		// heap on every path.
		if _, err := enc.Writer().Write(append([]byte(nil), head[:7+k]...)); err != nil {
			return err
		}
		_, err := enc.Writer().Write(b)
		return err
	}
	if _, err := w.Write(head[:7+k]); err != nil { // the concrete call keeps head off the heap
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
	n, kind, err := blockLen(d, c)
	if err != nil {
		return fmt.Errorf("a %s: %v", t, err)
	}
	if want := blockKind(t.Elem().Kind()); kind != 0 && kind != int(want) {
		return fmt.Errorf("a %s: a block of %s", t, blockKindName(kind))
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
// the elements that follow and their kind (0 for binary or not said).
func blockLen(d *msgpack.Decoder, c byte) (n, kind int, err error) {
	if !isExt(c) {
		n, err := d.DecodeBytesLen()
		return n, 0, err
	}
	id, n, err := d.DecodeExtHeader()
	if err != nil {
		return 0, 0, err
	}
	if id != BlockExt {
		return 0, 0, fmt.Errorf("an extension of type %d, not a block (%d)", id, BlockExt)
	}
	kind, k, err := blockHeadByte(d, n)
	if err != nil {
		return 0, 0, err
	}
	return n - 1 - k, kind, nil
}

// blockHeadByte reads the rest of a block's head after its extension
// header, n the extension's length: the kind of its elements (0 if not
// said) and the padding k, which it skips.
func blockHeadByte(d *msgpack.Decoder, n int) (kind, k int, err error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("a block extension of %d bytes, without its padding", n)
	}
	c, err := readByte(d)
	if err != nil {
		return 0, 0, err
	}
	kind, k = int(c>>3), int(c&7)
	if kind >= len(blockKinds) {
		return 0, 0, fmt.Errorf("a block of %s", blockKindName(kind))
	}
	if k > n-1 {
		return 0, 0, fmt.Errorf("a block padded by %d bytes of %d", k, n-1)
	}
	for range k {
		if _, err := readByte(d); err != nil {
			return 0, 0, err
		}
	}
	return kind, k, nil
}

// readByte reads one byte of d's input as it is (not a msgpack value):
// straight from a payload's reader, which msgpack/v5 reads unbuffered,
// without the allocation a buffer handed to Decoder.ReadFull costs.
func readByte(d *msgpack.Decoder) (byte, error) {
	if r, ok := d.Buffered().(*ownedReader); ok {
		return r.ReadByte()
	}
	b := make([]byte, 1)
	err := d.ReadFull(b)
	return b[0], err
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
		setNewSlice(v, n)
		if err := d.ReadFull(blockBytes(v)); err != nil {
			v.SetZero()
			return err
		}
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

// setNewSlice sets v, a settable slice of a block's elements, to n new
// zero elements: one allocation, where reflect.MakeSlice and Set cost two.
func setNewSlice(v reflect.Value, n int) {
	p := blockMake[blockKind(v.Type().Elem().Kind())](n)
	// A named slice type has the layout of its underlying one.
	*(*[]byte)(v.Addr().UnsafePointer()) = unsafe.Slice((*byte)(p), n)
}

// blockMake allocates n elements of each kind of blockKinds, typed.
var blockMake = [...]func(n int) unsafe.Pointer{nil, makeElems[bool], makeElems[int8], makeElems[int16], makeElems[int32], makeElems[int64],
	makeElems[uint16], makeElems[uint32], makeElems[uint64], makeElems[float32], makeElems[float64]}

func makeElems[E any](n int) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(make([]E, n))) }

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
