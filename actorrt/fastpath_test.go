package actorrt

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// plainArgs has an endpoint for each shape the fast paths know, and keeps
// what each received.
type plainArgs struct{ got any }

func (p *plainArgs) Bytes(ctx *Context, b []byte) error      { p.got = b; return nil }
func (p *plainArgs) Str(ctx *Context, s string) error        { p.got = s; return nil }
func (p *plainArgs) Int(ctx *Context, n int) error           { p.got = n; return nil }
func (p *plainArgs) Int64(ctx *Context, n int64) error       { p.got = n; return nil }
func (p *plainArgs) Float(ctx *Context, f float64) error     { p.got = f; return nil }
func (p *plainArgs) Bool(ctx *Context, b bool) error         { p.got = b; return nil }
func (p *plainArgs) Two(ctx *Context, n int, s string) error { p.got = []any{n, s}; return nil }

// TestFastPathsAsDecoder: on every payload, an endpoint's fast path
// either declines or gets what the decoder gets; and one takes each
// payload the runtime sends.
func TestFastPathsAsDecoder(t *testing.T) {
	at, err := inspect(reflect.TypeFor[plainArgs]())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range at.endpoints {
		setFastPaths[plainArgs](m)
	}
	mp := func(v ...any) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.UseCompactInts(true)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	sent := [][]byte{ // as the runtime encodes them
		mp([]byte("bytes")), mp([]byte{}), mp(bytes.Repeat([]byte{1}, 70000)), mp("str"), mp(""),
		mp(0), mp(-1), mp(300), mp(-70000), mp(math.MaxInt64), mp(math.MinInt64),
		mp(1.5), mp(float32(2.5)), mp(true), mp(false), mp(5, "five"),
	}
	others := [][]byte{
		mp(nil), mp(uint64(math.MaxUint64)), mp("a", "b"), mp(), {0xc0}, {0x91}, {0x91, 0xc1}, append(mp(1), 0), {0x92, 1},
		{0x91, 0xc6, 0x7f, 0xff, 0xff, 0xff}, {0x91, 0xd4, 1, 2}, mp([]int{1}), mp(map[string]int{"a": 1}),
	}
	ctx := &Context{}
	for k, p := range append(sent, others...) {
		taken := 0
		for name, m := range at.endpoints {
			slow := make([]reflect.Value, len(m.args))
			slowErr := decodeArgs(nil, p, false, m.args, slow)
			if m.void1 != nil {
				var recv plainArgs
				handled, err := m.void1(&recv, ctx, p, false)
				if handled {
					taken++
					if err != nil || slowErr != nil || !reflect.DeepEqual(recv.got, slow[0].Interface()) {
						t.Errorf("%s(%x): fast path %#v (%v), decoder %v", name, p, recv.got, err, slowErr)
					}
				}
			}
			fast := make([]reflect.Value, len(m.args))
			if m.readers != nil && readPlainArgs(p, false, m.readers, fast) {
				taken++
				for i := range fast {
					if slowErr != nil || !reflect.DeepEqual(fast[i].Interface(), slow[i].Interface()) || fast[i].Type() != m.args[i] {
						t.Errorf("%s(%x): argument %d read as %#v, decoder %v", name, p, i, fast[i], slowErr)
					}
				}
			}
		}
		if k < len(sent) && taken == 0 {
			t.Errorf("no fast path reads %x", p)
		}
	}
}
