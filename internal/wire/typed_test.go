package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// encodePair encodes v into two frames, after a prefix of pad bytes (a
// block's padding depends on where it starts): once with EncodeTyped,
// once with EncodeArg (the reflection path the adverbs took before), and
// returns both payloads.
func encodePair[T any](t *testing.T, v T, pad int) (typed, boxed []byte) {
	t.Helper()
	enc := func(typedPath bool) []byte {
		w := NewPayload(&Header{Kind: KindActor, Target: "m", Method: "f", Rank: -1}, 1<<30)
		defer w.Free()
		for range pad {
			w.Enc.EncodeBool(true)
		}
		var err error
		if typedPath {
			err = EncodeTyped(w.Enc, v)
		} else {
			err = EncodeArg(w.Enc, v)
		}
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		return bytes.Clone(w.Bytes())
	}
	return enc(true), enc(false)
}

// sameBytes checks that the typed and the reflection path write v alike,
// at every padding a block can need.
func sameBytes[T any](t *testing.T, v T) {
	t.Helper()
	for pad := range 8 {
		typed, boxed := encodePair(t, v, pad)
		if !bytes.Equal(typed, boxed) {
			t.Fatalf("%T %v at %d: typed % x, reflection % x", v, v, pad, typed, boxed)
		}
	}
}

// sameInts checks n as every integer type.
func sameInts(t *testing.T, n int64) {
	t.Helper()
	sameBytes(t, n)
	sameBytes(t, int(n))
	sameBytes(t, int8(n))
	sameBytes(t, int16(n))
	sameBytes(t, int32(n))
	sameBytes(t, uint(n))
	sameBytes(t, uint8(n))
	sameBytes(t, uint16(n))
	sameBytes(t, uint32(n))
	sameBytes(t, uint64(n))
}

// sameFloats checks x as float64 and float32.
func sameFloats(t *testing.T, x float64) {
	t.Helper()
	sameBytes(t, x)
	sameBytes(t, float32(x))
}

type (
	namedInt    int
	namedString string
	namedFloats []float32
	point       struct {
		X, Y float64
		Tag  string
	}
)

// TestEncodeTypedSameBytes: EncodeTyped writes every type as the
// reflection path does, the common ones at their edges included.
func TestEncodeTypedSameBytes(t *testing.T) {
	for _, n := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64} {
		sameInts(t, n)
		sameBytes(t, namedInt(n))
		sameBytes(t, time.Duration(n))
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1.5, -2.25, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN()} {
		sameFloats(t, f)
	}
	sameBytes(t, true)
	sameBytes(t, false)
	for _, s := range []string{"", "x", string(make([]byte, 31)), string(make([]byte, 32)), string(make([]byte, 256)), string(make([]byte, 65536))} {
		sameBytes(t, s)
		sameBytes(t, namedString(s))
	}
	for _, b := range [][]byte{nil, {}, {1, 2, 3}, make([]byte, 255), make([]byte, 256), make([]byte, ShareMin-1), make([]byte, ShareMin)} {
		sameBytes(t, b)
	}
	sameBytes(t, []float32(nil))
	sameBytes(t, []float32{})
	sameBytes(t, []float32{1, -2, float32(math.NaN())})
	sameBytes(t, make([]float32, ShareMin/4+3)) // shared into the frame
	sameBytes(t, []float64{math.Pi, -0.5})
	sameBytes(t, []int8{-1, 2})
	sameBytes(t, []int16{-1, 300})
	sameBytes(t, []int32{-1, 1 << 20})
	sameBytes(t, []int64{-1, 1 << 40})
	sameBytes(t, []uint16{1, 65535})
	sameBytes(t, []uint32{1, 1 << 31})
	sameBytes(t, []uint64{1, 1 << 63})
	sameBytes(t, []bool{true, false, true})
	sameBytes(t, []bool(nil))
	// The rest takes the reflection path on both sides; still the same.
	sameBytes(t, namedFloats{1, 2})
	sameBytes(t, [3]float32{1, 2, 3})
	sameBytes(t, point{1, 2, "p"})
	sameBytes(t, &point{3, 4, "q"})
	sameBytes(t, map[string]int{"a": 1})
	sameBytes(t, []string{"a", "b"})
	sameBytes(t, []int{1, -1, 1 << 40})
	sameBytes(t, time.Unix(1700000000, 5).UTC())
	sameBytes(t, any(nil))
	sameBytes(t, error(nil))
}

// TestEncodeTypedOtherEncoder: on an encoder that is not a frame's (here
// MarshalLimited's kind, without compact integers) EncodeTyped still
// writes what msgpack does.
func TestEncodeTypedOtherEncoder(t *testing.T) {
	check := func(v any, typed func(*msgpack.Encoder) error) {
		t.Helper()
		buf := &limitedBuffer{limit: 1 << 20, named: 1 << 20}
		enc := msgpack.NewEncoder(buf)
		if err := typed(enc); err != nil {
			t.Fatal(err)
		}
		want, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.b, want) {
			t.Errorf("%T %v: typed % x, msgpack % x", v, v, buf.b, want)
		}
	}
	check(int64(1), func(e *msgpack.Encoder) error { return EncodeTyped(e, int64(1)) })
	check(int32(-2), func(e *msgpack.Encoder) error { return EncodeTyped(e, int32(-2)) })
	check(uint16(3), func(e *msgpack.Encoder) error { return EncodeTyped(e, uint16(3)) })
	check("s", func(e *msgpack.Encoder) error { return EncodeTyped(e, "s") })
}

// TestEncodeTypedDoesNotBox: the common types are written without an
// allocation (the reflection path boxes each one into an interface).
func TestEncodeTypedDoesNotBox(t *testing.T) {
	w := NewPayload(&Header{Kind: KindActor, Target: "m", Method: "f", Rank: -1}, 1<<30)
	defer w.Free()
	payload := make([]byte, 32)
	floats := make([]float32, 8)
	check := func(name string, fn func() error) {
		t.Helper()
		for range 4 { // grow the frame's buffer first
			fn()
		}
		if n := testing.AllocsPerRun(100, func() {
			if err := fn(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per value", name, n)
		}
	}
	check("[]byte", func() error { return EncodeTyped(w.Enc, payload) })
	check("string", func() error { return EncodeTyped(w.Enc, "a string") })
	check("int", func() error { return EncodeTyped(w.Enc, 1<<40) })
	check("uint32", func() error { return EncodeTyped(w.Enc, uint32(7)) })
	check("float64", func() error { return EncodeTyped(w.Enc, 2.5) })
	check("bool", func() error { return EncodeTyped(w.Enc, true) })
	check("[]float32", func() error { return EncodeTyped(w.Enc, floats) })
}

// FuzzEncodeTyped: values made from the fuzzer's bytes encode alike on
// both paths.
func FuzzEncodeTyped(f *testing.F) {
	f.Add([]byte{}, "", int64(0), 0.0, false)
	f.Add([]byte("0123456789abcdef0123456789abcdef"), "name", int64(-33), math.Inf(-1), true)
	f.Add(bytes.Repeat([]byte{7}, 300), string(make([]byte, 40)), int64(math.MinInt64), math.NaN(), false)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, "é", int64(math.MaxUint32), math.Copysign(0, -1), true)
	f.Fuzz(func(t *testing.T, b []byte, s string, n int64, x float64, flag bool) {
		sameBytes(t, b)
		sameBytes(t, s)
		sameInts(t, n)
		sameFloats(t, x)
		sameBytes(t, flag)
		// The bytes as each kind of block.
		u16 := elems(b, 2, binary.LittleEndian.Uint16)
		u32 := elems(b, 4, binary.LittleEndian.Uint32)
		u64 := elems(b, 8, binary.LittleEndian.Uint64)
		sameBytes(t, u16)
		sameBytes(t, u32)
		sameBytes(t, u64)
		sameBytes(t, convert[int16](u16))
		sameBytes(t, convert[int32](u32))
		sameBytes(t, convert[int64](u64))
		sameBytes(t, convert[int8](b))
		sameBytes(t, elems(b, 4, func(p []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(p)) }))
		sameBytes(t, elems(b, 8, func(p []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(p)) }))
		sameBytes(t, elems(b, 1, func(p []byte) bool { return p[0]&1 == 1 }))
		sameBytes(t, point{x, float64(n), s})
	})
}

// elems reads b as elements of size bytes each, with get.
func elems[E any](b []byte, size int, get func([]byte) E) []E {
	out := make([]E, len(b)/size)
	for i := range out {
		out[i] = get(b[size*i:])
	}
	return out
}

// convert is xs, each converted to E.
func convert[E, F int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64](xs []F) []E {
	out := make([]E, len(xs))
	for i, x := range xs {
		out[i] = E(x)
	}
	return out
}
