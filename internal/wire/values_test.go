package wire

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
	"github.com/vmihailenco/msgpack/v5"
)

// plainReads are the reads of Values, each beside the Go type msgpack/v5
// decodes into for it.
var plainReads = []struct {
	typ  reflect.Type
	read func(v *Values) (any, bool)
}{
	{reflect.TypeFor[[]byte](), func(v *Values) (any, bool) { return v.Bytes() }},
	{reflect.TypeFor[string](), func(v *Values) (any, bool) { return v.String() }},
	{reflect.TypeFor[int64](), func(v *Values) (any, bool) { return v.Int() }},
	{reflect.TypeFor[float64](), func(v *Values) (any, bool) { return v.Float64() }},
	{reflect.TypeFor[bool](), func(v *Values) (any, bool) { return v.Bool() }},
}

// checkPlain reads p as one value of each plain type and checks that
// wherever Values reads all of p, msgpack/v5 decodes the same value. It
// returns how many types Values read p as.
func checkPlain(t *testing.T, p []byte) int {
	t.Helper()
	read := 0
	for _, pr := range plainReads {
		v := ReadValues(p, false)
		got, ok := pr.read(&v)
		if !ok || !v.End() {
			continue
		}
		read++
		want := reflect.New(pr.typ)
		if err := msgpack.Unmarshal(p, want.Interface()); err != nil {
			t.Fatalf("%x: Values reads %s %#v, msgpack fails: %v", p, pr.typ, got, err)
		}
		if w := want.Elem().Interface(); !reflect.DeepEqual(got, w) && !bothNaN(got, w) {
			t.Fatalf("%x as %s: Values reads %#v, msgpack %#v", p, pr.typ, got, w)
		}
	}
	return read
}

func bothNaN(a, b any) bool {
	x, ok1 := a.(float64)
	y, ok2 := b.(float64)
	return ok1 && ok2 && math.IsNaN(x) && math.IsNaN(y)
}

// TestValuesAsMsgpack: every encoding of a plain value that the encoder
// writes is read by Values (the fast path is taken), as msgpack/v5 reads
// it.
func TestValuesAsMsgpack(t *testing.T) {
	values := []any{
		[]byte(nil), []byte{}, []byte("x"), bytes.Repeat([]byte{7}, 300), bytes.Repeat([]byte{8}, 70000),
		"", "short", string(bytes.Repeat([]byte{'s'}, 40)), string(bytes.Repeat([]byte{'m'}, 300)), string(bytes.Repeat([]byte{'l'}, 70000)),
		0, 1, 127, 128, 255, 256, 65535, 65536, 1 << 32, math.MaxInt64, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32 - 1, math.MinInt64,
		uint64(math.MaxUint64), float32(1.5), 2.25, math.Inf(-1), math.NaN(), true, false,
	}
	for _, compact := range []bool{false, true} {
		for _, x := range values {
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			enc.UseCompactInts(compact)
			enc.UseCompactFloats(compact)
			if err := enc.Encode(x); err != nil {
				t.Fatal(err)
			}
			if checkPlain(t, buf.Bytes()) == 0 {
				t.Errorf("%T %.20v (compact %v): the fast path reads none of %x", x, x, compact, buf.Bytes()[:min(buf.Len(), 8)])
			}
		}
	}
}

// TestValuesNotRead: what Values leaves to the decoder (a form it does not
// read, a value cut short, bytes left over) makes ok false, and nothing
// is allocated for a length that is not there.
func TestValuesNotRead(t *testing.T) {
	for _, p := range [][]byte{
		nil,
		{0xc0},                              // nil, as a number or bool: msgpack reads 0 or false
		{0xca, 0, 0},                        // float32 cut short
		{0xdb, 0xff, 0xff, 0xff},            // str32 length cut short
		{0xc6, 0x7f, 0xff, 0xff, 0xff, 'x'}, // bin32 of 2 GiB in 6 bytes
		{0x01, 0x02},                        // an int and a byte left over
		{0x91, 0x01},                        // an array
		{0xd4, 0x01, 0x02},                  // an extension
	} {
		for _, pr := range plainReads {
			if len(p) == 1 && p[0] == 0xc0 && (pr.typ.Kind() == reflect.Slice || pr.typ.Kind() == reflect.String) {
				continue // read, as nil and ""
			}
			v := ReadValues(p, false)
			if got, ok := pr.read(&v); ok && v.End() {
				t.Errorf("%x read as %s %#v", p, pr.typ, got)
			}
		}
	}
	if n := alloc.By(func() {
		v := ReadValues([]byte{0xc6, 0x7f, 0xff, 0xff, 0xff, 'x'}, false)
		v.Bytes()
	}); n > alloc.Slack {
		t.Errorf("a bin32 claiming 2 GiB allocated %d bytes", n)
	}
}

// TestValuesShare: with share, a []byte of ShareMin bytes or more is the
// payload's own bytes, capped so that an append cannot overwrite what
// follows; a shorter one, or without share, is a copy.
func TestValuesShare(t *testing.T) {
	big, _ := msgpack.Marshal(bytes.Repeat([]byte{1}, ShareMin))
	p := append(big, 0x07)
	v := ReadValues(p, true)
	b, ok := v.Bytes()
	if !ok || len(b) != ShareMin || &b[0] != &p[5] || cap(b) != len(b) {
		t.Fatalf("shared read: ok %v, %d bytes, shares the payload: %v", ok, len(b), ok && &b[0] == &p[5])
	}
	for _, share := range []bool{false, true} {
		small, _ := msgpack.Marshal(bytes.Repeat([]byte{1}, ShareMin-1))
		for _, q := range [][]byte{small, big} {
			if q == nil || (share && len(q) == len(big)) {
				continue
			}
			v := ReadValues(q, share)
			b, _ := v.Bytes()
			if &b[0] == &q[len(q)-len(b)] {
				t.Errorf("%d bytes (share %v) not copied", len(b), share)
			}
		}
	}
}

// FuzzValues reads any bytes as each plain type: where Values reads them
// all, msgpack/v5 reads the same value.
func FuzzValues(f *testing.F) {
	for _, x := range []any{[]byte("abc"), "str", 300, -5, 1.5, float32(2), true, nil} {
		b, _ := msgpack.Marshal(x)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		checkPlain(t, p)
		// As an argument list of two, as the runtime reads one.
		v := ReadValues(p, false)
		if n, ok := v.ArrayLen(); ok && n == 2 {
			a, ok1 := v.Int()
			s, ok2 := v.String()
			if ok1 && ok2 && v.End() {
				var want struct {
					_msgpack struct{} `msgpack:",as_array"`
					A        int64
					S        string
				}
				if err := msgpack.Unmarshal(p, &want); err != nil || want.A != a || want.S != s {
					t.Fatalf("%x: Values reads [%d %q], msgpack [%d %q] (%v)", p, a, s, want.A, want.S, err)
				}
			}
		}
	})
}

// TestEncodeBytesShares: a large []byte is not copied into the frame but
// referred to, and the frame's parts are the bytes a plain encoding gives;
// the frame's limit still holds.
func TestEncodeBytesShares(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), ShareMin/8)
	h := Header{Kind: KindActor, Target: "m", Method: "Put", Rank: -1}
	w, err := NewFrame(&h, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	args := []any{"before", big, 7, []byte("small")}
	w.Enc.EncodeArrayLen(len(args))
	for _, a := range args {
		if err := EncodeArg(w.Enc, a); err != nil {
			t.Fatal(err)
		}
	}
	plain, _ := NewFrame(&h, 1<<30)
	defer plain.Free()
	plain.Enc.Encode(args)
	parts := w.Parts()
	if !bytes.Equal(bytes.Join(parts, nil), plain.Bytes()) || !bytes.Equal(w.Bytes(), plain.Bytes()) {
		t.Fatal("the frame's parts differ from the plain encoding")
	}
	shared := false
	for _, p := range parts {
		shared = shared || len(p) > 0 && &p[0] == &big[0]
	}
	if !shared || len(parts) != 3 {
		t.Fatalf("%d parts; the large argument shared: %v", len(parts), shared)
	}

	small, _ := NewFrame(&h, ShareMin)
	defer small.Free()
	err = EncodeBytes(small.Enc, big)
	if tl := small.TooLarge("big", err); !errors.Is(tl, ErrTooLarge) {
		t.Fatalf("a shared []byte past the limit: %v", err)
	}
}
