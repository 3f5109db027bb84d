package wire

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/monarch-go/monarch/bus"
)

// BenchmarkParseFrame decodes the frame of a call to a whole mesh and of a
// call to a slice: the work done on every message received.
func BenchmarkParseFrame(b *testing.B) {
	sliced := []int{0, 4, 1, 2, 4, 1} // hosts=4, gpus=8 sliced to gpus 2:6
	for _, bc := range []struct {
		name string
		h    Header
	}{
		{"whole", Header{Kind: KindActor, Target: "c.m12", Method: "Step", Port: 77, ReplyTo: "c", Rank: -1}},
		{"slice", Header{Kind: KindActor, Target: "c.m12", Method: "Step", Port: 77, ReplyTo: "c", Rank: -1, Region: sliced}},
		{"reply", Header{Kind: KindPort, Port: 77, ReplyTo: "c-3", Rank: 5}},
	} {
		w, _ := NewFrame(&bc.h, bus.DefaultMaxMessage)
		w.Enc.Encode([]any{1, "x"})
		data := append([]byte(nil), w.Bytes()...)
		w.Free()
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// elemF32 is a float32 that is not a block's element type: a slice of it
// travels element by element, as a []float32 did before blocks.
type elemF32 float32

// BenchmarkSmallBlocks: a small []float32 argument framed and decoded
// (NewFrame, Parse, DecodePayload: what one message costs the two ends),
// as a block, element by element (as before blocks), and the same bytes
// as a []byte. ns/op; a block should cost no more than the elements and
// little more than the bytes.
func BenchmarkSmallBlocks(b *testing.B) {
	h := Header{Kind: KindActor, Target: "c.m12", Method: "Step", Port: 77, ReplyTo: "c", Rank: -1}
	for _, n := range []int{8, 64} {
		f32 := make([]float32, n)
		el := make([]elemF32, n)
		for i := range f32 {
			f32[i], el[i] = float32(i)+0.5, elemF32(i)+0.5
		}
		raw := make([]byte, 4*n)
		trip := func(b *testing.B, v any, into func(*msgpack.Decoder) error, t reflect.Type) {
			for b.Loop() {
				w, err := NewFrame(&h, bus.DefaultMaxMessage)
				if err != nil {
					b.Fatal(err)
				}
				if err := EncodeArg(w.Enc, v); err != nil {
					b.Fatal(err)
				}
				f, err := Parse(w.Bytes())
				if err != nil {
					b.Fatal(err)
				}
				if err := DecodePayload(f.Payload, []reflect.Type{t}, into); err != nil {
					b.Fatal(err)
				}
				w.Free()
			}
		}
		b.Run(fmt.Sprintf("float32-block-%d", n), func(b *testing.B) {
			var out []float32
			trip(b, f32, func(d *msgpack.Decoder) error { return d.Decode(&out) }, reflect.TypeFor[[]float32]())
		})
		b.Run(fmt.Sprintf("float32-elements-%d", n), func(b *testing.B) {
			var out []elemF32
			trip(b, el, func(d *msgpack.Decoder) error { return d.Decode(&out) }, reflect.TypeFor[[]elemF32]())
		})
		b.Run(fmt.Sprintf("bytes-%d", 4*n), func(b *testing.B) {
			var out []byte
			trip(b, raw, func(d *msgpack.Decoder) error { return d.Decode(&out) }, reflect.TypeFor[[]byte]())
		})
	}
}
