package wire

import (
	"testing"

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
