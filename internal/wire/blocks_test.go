package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

type weights []float32

type blockRecord struct {
	Name  string
	W     weights
	Grads []float64
	Mask  [4]bool
	Shape [3]int64
}

func init() { // as actorrt's prepareWire does for a type it meets
	for _, v := range []any{weights(nil), [4]bool{}, [3]int64{}} {
		RegisterBlock(reflect.TypeOf(v))
	}
}

// decodeChecked decodes p into a new value of v's type the way a
// received payload is decoded.
func decodeChecked[T any](p []byte) (T, error) {
	var out T
	err := DecodePayload(p, []reflect.Type{reflect.TypeFor[T]()}, func(d *msgpack.Decoder) error { return d.Decode(&out) })
	return out, err
}

// The wire form, byte by byte: a binary value holding the elements
// little-endian, whatever this machine's order. This is what makes the
// values the same on every architecture: the encoder's bytes are fixed
// here, and the decoder reads the bytes fixed here.
func TestBlockWireForm(t *testing.T) {
	le := func(vals ...uint64) func(size int) []byte {
		return func(size int) []byte {
			var b []byte
			for _, v := range vals {
				switch size {
				case 1:
					b = append(b, byte(v))
				case 2:
					b = binary.LittleEndian.AppendUint16(b, uint16(v))
				case 4:
					b = binary.LittleEndian.AppendUint32(b, uint32(v))
				case 8:
					b = binary.LittleEndian.AppendUint64(b, v)
				}
			}
			return b
		}
	}
	m1 := uint64(math.MaxUint64) // -1 in two's complement
	for _, c := range []struct {
		v    any
		kind byte // the number of its element kind in the header
		size int
		want func(int) []byte
	}{
		{[]float32{1.5, -2}, 9, 4, le(uint64(math.Float32bits(1.5)), uint64(math.Float32bits(-2)))},
		{[]float64{math.Pi, math.Inf(-1)}, 10, 8, le(math.Float64bits(math.Pi), math.Float64bits(math.Inf(-1)))},
		{[]int8{-1, 7}, 2, 1, le(m1, 7)},
		{[]int16{-1, 0x102}, 3, 2, le(m1, 0x102)},
		{[]int32{-1, 0x1020304}, 4, 4, le(m1, 0x1020304)},
		{[]int64{-1, 0x102030405060708}, 5, 8, le(m1, 0x102030405060708)},
		{[]uint16{0xfffe}, 6, 2, le(0xfffe)},
		{[]uint32{0xfffefdfc}, 7, 4, le(0xfffefdfc)},
		{[]uint64{0x0102030405060708}, 8, 8, le(0x0102030405060708)},
		{[]bool{true, false, true}, 1, 1, le(1, 0, 1)},
		{weights{3}, 9, 4, le(uint64(math.Float32bits(3)))},
		{[3]int64{1, -1, 2}, 5, 8, le(1, m1, 2)},
	} {
		got, err := msgpack.Marshal(c.v)
		if err != nil {
			t.Fatalf("%T: %v", c.v, err)
		}
		body := c.want(c.size)
		k := (c.size - 7%c.size) % c.size // the elements start at an offset that is a multiple of their size
		want := binary.BigEndian.AppendUint32([]byte{0xc9}, uint32(1+k+len(body)))
		want = append(append(append(want, BlockExt, c.kind<<3|byte(k)), make([]byte, k)...), body...)
		if !bytes.Equal(got, want) {
			t.Errorf("%T %v: encoded % x, want % x", c.v, c.v, got, want)
		}
		// The decoder reads that, the same without the kind, and the
		// same elements as binary.
		unsaid := bytes.Clone(want)
		unsaid[6] &= 7
		for _, p := range [][]byte{got, unsaid, append([]byte{0xc4, byte(len(body))}, body...)} {
			back := reflect.New(reflect.TypeOf(c.v))
			if err := DecodePayload(p, []reflect.Type{back.Type().Elem()}, func(d *msgpack.Decoder) error { return d.DecodeValue(back.Elem()) }); err != nil {
				t.Fatalf("%T: decoding % x: %v", c.v, p, err)
			}
			if !reflect.DeepEqual(back.Elem().Interface(), c.v) {
				t.Errorf("%T: decoded %v from % x, want %v", c.v, back.Elem().Interface(), p, c.v)
			}
		}
	}
}

// In a frame the padding puts the elements at an offset from the
// payload's start that is a multiple of their alignment, whatever comes
// before them; a large block is shared, not copied.
func TestBlockAlignedInFrame(t *testing.T) {
	big := make([]float64, ShareMin/8)
	for i := range big {
		big[i] = float64(i)
	}
	for pre := 0; pre < 9; pre++ {
		w := NewPayload(&Header{Kind: KindActor, Target: "t"}, 1<<30)
		if err := w.Enc.EncodeArrayLen(2); err != nil {
			t.Fatal(err)
		}
		if err := w.Enc.EncodeString(strings.Repeat("x", pre)); err != nil {
			t.Fatal(err)
		}
		if err := w.Enc.Encode(big); err != nil {
			t.Fatal(err)
		}
		var p []byte
		for _, part := range w.Parts() {
			if len(part) == len(big)*8 && unsafe.SliceData(part) == (*byte)(unsafe.Pointer(&big[0])) {
				if at := len(p); at%8 != 0 {
					t.Errorf("after a string of %d bytes the elements start at %d", pre, at)
				}
			}
			p = append(p, part...)
		}
		w.Free()
		if want := 1 + 1 + pre + 7; len(p) < want+len(big)*8 || len(p) > want+7+len(big)*8 {
			t.Errorf("after a string of %d: a payload of %d bytes, the block not shared or padded too much", pre, len(p))
		}
	}
}

func TestBlockRoundTrip(t *testing.T) {
	big := make([]float32, (ShareMin/4)+3)
	for i := range big {
		big[i] = float32(i) * 0.25
	}
	in := blockRecord{Name: "layer", W: big, Grads: []float64{}, Mask: [4]bool{true, false, false, true}, Shape: [3]int64{2, -3, 5}}
	p, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > 4*len(big)+100 {
		t.Errorf("a record of %d float32s took %d bytes: not a block", len(big), len(p))
	}
	out, err := decodeChecked[blockRecord](p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Errorf("decoded %d floats, %v, %v, %v; want %d, %v, %v, %v", len(out.W), out.Grads, out.Mask, out.Shape, len(in.W), in.Grads, in.Mask, in.Shape)
	}
	// A nil slice stays nil, an empty one empty.
	nilp, _ := msgpack.Marshal([]float64(nil))
	if v, err := decodeChecked[[]float64](nilp); err != nil || v != nil {
		t.Errorf("nil: got %#v, %v", v, err)
	}
	emp, _ := msgpack.Marshal([]float64{})
	if v, err := decodeChecked[[]float64](emp); err != nil || v == nil || len(v) != 0 {
		t.Errorf("empty: got %#v, %v", v, err)
	}
}

// A value written element by element (before blocks, or by another
// msgpack writer) decodes the same.
func TestBlockReadsElementForm(t *testing.T) {
	var p []byte
	p = append(p, 0x93, 0xca)
	p = binary.BigEndian.AppendUint32(p, math.Float32bits(1.25))
	p = append(p, 0x02, 0xd0, 0xff) // an int, as msgpack/v5 reads into a float32
	v, err := decodeChecked[[]float32](p)
	if err != nil || !reflect.DeepEqual(v, []float32{1.25, 2, -1}) {
		t.Errorf("got %v, %v", v, err)
	}
	a, err := decodeChecked[[3]int64]([]byte{0x93, 0x01, 0xff, 0x02})
	if err != nil || a != [3]int64{1, -1, 2} {
		t.Errorf("array: got %v, %v", a, err)
	}
}

func TestBlockBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		p    []byte
		dec  func([]byte) error
		want string
	}{
		{"a float32 block of 6 bytes", []byte{0xc4, 6, 0, 0, 0, 0, 0, 0},
			func(p []byte) error { _, err := decodeChecked[[]float32](p); return err }, "not a whole number of 4-byte elements"},
		{"an array block of the wrong length", []byte{0xc4, 8, 0, 0, 0, 0, 0, 0, 0, 0},
			func(p []byte) error { _, err := decodeChecked[[3]int64](p); return err }, "a block of 8 bytes, want 24"},
		{"a bool of byte 2", []byte{0xc4, 2, 1, 2},
			func(p []byte) error { _, err := decodeChecked[[]bool](p); return err }, "element 1 is the byte 2"},
		{"a string where a block is", []byte{0xa1, 'x'},
			func(p []byte) error { _, err := decodeChecked[[]float64](p); return err }, "a []float64"},
		{"a block padded past its length", []byte{0xc9, 0, 0, 0, 3, BlockExt, 7, 0, 0},
			func(p []byte) error { _, err := decodeChecked[[]float64](p); return err }, "padded by 7 bytes of 2"},
		{"a float64 block for a []float32", []byte{0xc9, 0, 0, 0, 9, BlockExt, 10 << 3, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f},
			func(p []byte) error { _, err := decodeChecked[[]float32](p); return err }, "a []float32: a block of []float64"},
		{"a uint64 block for a [3]int64", append([]byte{0xc9, 0, 0, 0, 25, BlockExt, 8 << 3}, make([]byte, 24)...),
			func(p []byte) error { _, err := decodeChecked[[3]int64](p); return err }, "a [3]int64: a block of []uint64"},
		{"a block of kind 31", []byte{0xc9, 0, 0, 0, 5, BlockExt, 0xf8, 1, 2, 3, 4},
			func(p []byte) error { _, err := decodeChecked[[]float32](p); return err }, "a block of unknown kind 31"},
		{"a block of kind 11 into any", []byte{0xc9, 0, 0, 0, 5, BlockExt, 11 << 3, 1, 2, 3, 4},
			func(p []byte) error { _, err := decodeChecked[any](p); return err }, "a block of unknown kind 11"},
		{"another extension", []byte{0xc9, 0, 0, 0, 5, 65, 0, 1, 2, 3, 4},
			func(p []byte) error { _, err := decodeChecked[[]float32](p); return err }, "an extension of type 65, not a block"},
		{"an array of 2 for [3]int64", []byte{0x92, 1, 2},
			func(p []byte) error { _, err := decodeChecked[[3]int64](p); return err }, "an array of 2 elements, want 3"},
	} {
		err := c.dec(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// A length past the bytes present allocates nothing for it, also through
// a decoder that cannot see how many bytes are left.
func TestBlockLengthBound(t *testing.T) {
	p := []byte{0xc6, 0x7f, 0xff, 0xff, 0xfc, 1, 2, 3, 4} // 2 GiB claimed, 4 bytes present
	if _, err := decodeChecked[[]float32](p); !errors.Is(err, errShort) {
		t.Errorf("checked: got %v, want errShort", err)
	}
	var v []float32
	if err := msgpack.Unmarshal(p, &v); err == nil {
		t.Error("msgpack.Unmarshal: no error")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var w []float32
	if err := msgpack.NewDecoder(onlyReader{bytes.NewReader(p)}).Decode(&w); err == nil {
		t.Error("unsized reader: no error")
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
		t.Errorf("a 2 GiB claim over 4 bytes allocated %d bytes", n)
	}
}

// onlyReader hides everything but Read: the decoder cannot see what is
// left.
type onlyReader struct{ r *bytes.Reader }

func (o onlyReader) Read(b []byte) (int, error) { return o.r.Read(b) }

func FuzzBlocks(f *testing.F) {
	for _, v := range []any{[]float32{1, 2}, []float64{math.NaN()}, []bool{true}, [3]int64{1, 2, 3}, []int16{-5}, []float32(nil), []float32{}} {
		p, _ := msgpack.Marshal(v)
		f.Add(p)
	}
	f.Add([]byte{0x92, 0xca, 0, 0, 0, 0, 1})
	f.Add([]byte{0xc4, 6, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xc4, 2, 1, 2})
	f.Add([]byte{0xc6, 0x7f, 0xff, 0xff, 0xfc, 1, 2, 3, 4})
	f.Add([]byte{0xc4, 8, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40})                              // binary
	f.Add([]byte{0xc9, 0, 0, 0, 3, BlockExt, 7, 0, 0})                                   // padding past its bound
	f.Add([]byte{0xc9, 0, 0, 0, 5, BlockExt, 0xf8, 1, 2, 3, 4})                          // kind 31
	f.Add([]byte{0xc9, 0, 0, 0, 9, BlockExt, 10 << 3, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f})     // a []float64
	f.Add([]byte{0xc9, 0, 0, 0, 5, BlockExt, 9 << 3, 0, 0, 0x80, 0x3f})                  // a []float32
	f.Add([]byte{0x81, 0xa1, 'w', 0xc9, 0, 0, 0, 5, BlockExt, 9 << 3, 0, 0, 0x80, 0x3f}) // in a map
	f.Add([]byte{0xc9, 0, 0, 0, 0, BlockExt})                                            // no padding byte
	f.Add([]byte{0xc9, 0, 0, 0, 5, 65, 0, 1, 2, 3, 4})                                   // another extension
	f.Add([]byte{0xd6, BlockExt, 0, 1, 0, 1})                                            // fixext 4
	f.Add([]byte{0xc9, 0x7f, 0xff, 0xff, 0xff, BlockExt, 1, 0, 1, 2, 3, 4})              // a length past the end
	f.Fuzz(func(t *testing.T, p []byte) {
		if r, err := decodeChecked[blockRecord](p); err == nil {
			q, err := msgpack.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := decodeChecked[blockRecord](q)
			if err != nil || !reflect.DeepEqual(blockCmp(r), blockCmp(r2)) {
				t.Fatalf("re-decoding % x: %v", q, err)
			}
		}
		for _, f := range []func() error{
			func() error { _, err := decodeChecked[[]float32](p); return err },
			func() error { _, err := decodeChecked[[]bool](p); return err },
			func() error { _, err := decodeChecked[[3]int64](p); return err },
			func() error { _, err := decodeChecked[[]uint64](p); return err },
			func() error { var v []float64; return msgpack.Unmarshal(p, &v) },
			func() error { _, err := decodeChecked[map[string]any](p); return err },
			func() error { _, err := decodeChecked[[]any](p); return err },
		} {
			f()
		}
	})
}

// blockCmp is r with its floats as bits, for comparing NaNs.
func blockCmp(r blockRecord) any {
	w := make([]uint32, len(r.W))
	for i, x := range r.W {
		w[i] = math.Float32bits(x)
	}
	g := make([]uint64, len(r.Grads))
	for i, x := range r.Grads {
		g[i] = math.Float64bits(x)
	}
	return []any{r.Name, w, r.W == nil, g, r.Grads == nil, r.Mask, r.Shape}
}

// DecodeSharedFor hands out a large aligned block in place; an unaligned
// one, a bool block, or one decoded by DecodePayload is copied.
func TestBlockShared(t *testing.T) {
	v := make([]float32, ShareMin/4)
	for i := range v {
		v[i] = float32(i)
	}
	enc, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	backing := make([]uint64, len(enc)/8+2) // 8-aligned memory
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&backing[0])), len(backing)*8)
	inside := func(got []float32, p []byte) bool {
		a, lo := uintptr(unsafe.Pointer(&got[0])), uintptr(unsafe.Pointer(&p[0]))
		return a >= lo && a < lo+uintptr(len(p))
	}
	types := []reflect.Type{reflect.TypeFor[[]float32]()}
	for _, c := range []struct {
		shift  int
		shared bool
		decode func(any, []byte, []reflect.Type, func(*msgpack.Decoder) error) error
	}{
		{0, true, DecodeSharedFor},
		{1, false, DecodeSharedFor},
		{0, false, DecodePayloadFor},
	} {
		p := mem[c.shift : c.shift+len(enc)]
		copy(p, enc)
		var got []float32
		if err := c.decode(nil, p, types, func(d *msgpack.Decoder) error { return d.Decode(&got) }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("shift %d: the values differ", c.shift)
		}
		if inside(got, p) != c.shared && nativeLittle {
			t.Errorf("shift %d: in place %v, want %v", c.shift, !c.shared, c.shared)
		}
	}
}

// The big-endian path, run here by pretending this machine is big-endian:
// the encoder must reverse the bytes of each element of 2 bytes or more
// (on a big-endian machine that turns its memory into the little-endian
// wire form) and the decoder must reverse them back, so that a value
// round-trips and one-byte elements pass untouched.
func TestBlockSwappedOrder(t *testing.T) {
	if !nativeLittle {
		t.Skip("a big-endian machine runs this path for real (TestBlockWireForm)")
	}
	nativeLittle = false
	t.Cleanup(func() { nativeLittle = true })
	for _, c := range []struct {
		v    any
		size int
	}{
		{[]float32{1.5, -2}, 4}, {[]float64{math.Pi}, 8}, {[]int16{0x102}, 2}, {[]uint64{0x0102030405060708}, 8},
		{[]int8{-1, 7}, 1}, {[]bool{true, false}, 1}, {[3]int64{1, -1, 2}, 8},
	} {
		got, err := msgpack.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		a := reflect.New(reflect.TypeOf(c.v)).Elem() // addressable, for an array
		a.Set(reflect.ValueOf(c.v))
		mem := blockBytes(a)
		want := make([]byte, len(mem))
		swapBlock(want, mem, c.size)
		if body := got[len(got)-len(mem):]; !bytes.Equal(body, want) {
			t.Errorf("%T: elements % x, want each reversed: % x", c.v, body, want)
		}
		back := reflect.New(reflect.TypeOf(c.v))
		if err := DecodePayload(got, []reflect.Type{back.Type().Elem()}, func(d *msgpack.Decoder) error { return d.DecodeValue(back.Elem()) }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Elem().Interface(), c.v) {
			t.Errorf("%T: decoded %v, want %v", c.v, back.Elem().Interface(), c.v)
		}
	}
}

// A block inside an interface value cannot come back as its own type
// (msgpack/v5 decodes an extension into an interface only as one
// registered type): decoding it there is an error naming the block, in
// every place an interface is decoded; a typed block beside an interface
// is unaffected.
func TestBlockInAny(t *testing.T) {
	type withAny struct {
		W []float32
		X any
	}
	for _, c := range []struct {
		name string
		v    any
		dec  func([]byte) (any, error)
		want string
	}{
		{"any", []float32{1, 2}, func(p []byte) (any, error) { return decodeChecked[any](p) }, "a []float32 of 8 bytes inside an interface value"},
		{"map[string]any", map[string]any{"w": []float64{1}}, func(p []byte) (any, error) { return decodeChecked[map[string]any](p) }, "a []float64 of 8 bytes inside an interface value"},
		{"[]any", []any{"x", []bool{true}}, func(p []byte) (any, error) { return decodeChecked[[]any](p) }, "a []bool of 1 bytes inside an interface value"},
		{"a field of type any", withAny{W: []float32{1}, X: weights{1, 2, 3}}, func(p []byte) (any, error) { return decodeChecked[withAny](p) }, "a []float32 of 12 bytes inside an interface value"},
		{"an array in any", [3]int64{1, 2, 3}, func(p []byte) (any, error) { return decodeChecked[any](p) }, "a []int64 of 24 bytes inside"},
	} {
		p, err := msgpack.Marshal(c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, err := c.dec(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %#v, %v; want an error saying %q", c.name, got, err, c.want)
		}
	}
	p, _ := msgpack.Marshal(withAny{W: []float32{1.5}, X: "x"})
	if got, err := decodeChecked[withAny](p); err != nil || !reflect.DeepEqual(got, withAny{W: []float32{1.5}, X: "x"}) {
		t.Errorf("a block beside an any: got %#v, %v", got, err)
	}
}
