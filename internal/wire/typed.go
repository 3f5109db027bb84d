package wire

import (
	"reflect"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// EncodeTyped encodes v into a frame's encoder (Writer.Enc) exactly as
// EncodeArg(enc, v) does, without boxing v: the common types (string,
// []byte, bool, the sized and unsized ints, the floats, the numeric
// slices that travel as blocks) are written directly; any other type
// (a named one, which may carry a codec of its own, a struct, a map, an
// array) goes through msgpack's reflection, as EncodeArg sends it. The
// generated adverbs encode their arguments with it: a []any and a box
// per argument were an eighth of a Broadcast's time.
//
// On an encoder that is not a frame's (NewFrame, NewPayload), every value
// takes the reflection path: the direct forms assume a frame's compact
// integers.
func EncodeTyped[T any](enc *msgpack.Encoder, v T) error {
	if w, framed := enc.Writer().(*limitedBuffer); framed && w.compact {
		// any(v) here does not escape: the switch reads it in place.
		switch x := any(v).(type) {
		case []byte:
			return EncodeBytes(enc, x)
		case string:
			return enc.EncodeString(x)
		case bool:
			return enc.EncodeBool(x)
		case int:
			return enc.EncodeInt(int64(x))
		case int8:
			return enc.EncodeInt(int64(x))
		case int16:
			return enc.EncodeInt(int64(x))
		case int32:
			return enc.EncodeInt(int64(x))
		case int64:
			return enc.EncodeInt(x)
		case uint:
			return enc.EncodeUint(uint64(x))
		case uint8:
			return enc.EncodeUint(uint64(x))
		case uint16:
			return enc.EncodeUint(uint64(x))
		case uint32:
			return enc.EncodeUint(uint64(x))
		case uint64:
			return enc.EncodeUint(x)
		case float32:
			return enc.EncodeFloat32(x)
		case float64:
			return enc.EncodeFloat64(x)
		case []float32:
			return typedBlock(enc, x)
		case []float64:
			return typedBlock(enc, x)
		case []int8:
			return typedBlock(enc, x)
		case []int16:
			return typedBlock(enc, x)
		case []int32:
			return typedBlock(enc, x)
		case []int64:
			return typedBlock(enc, x)
		case []uint16:
			return typedBlock(enc, x)
		case []uint32:
			return typedBlock(enc, x)
		case []uint64:
			return typedBlock(enc, x)
		case []bool:
			return typedBlock(enc, x)
		}
	}
	return EncodeArg(enc, v)
}

// typedBlock writes a numeric slice as encodeBlock does, without
// reflect.Value.
func typedBlock[E bool | int8 | int16 | int32 | int64 | uint16 | uint32 | uint64 | float32 | float64](enc *msgpack.Encoder, x []E) error {
	if x == nil {
		return enc.EncodeNil()
	}
	var e E
	size := int(unsafe.Sizeof(e))
	b := []byte{} // not nil: a block of none
	if len(x) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*size)
	}
	return writeBlock(enc, b, size, int(unsafe.Alignof(e)), reflect.TypeFor[[]E]())
}
