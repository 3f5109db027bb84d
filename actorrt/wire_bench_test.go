package actorrt

import (
	"testing"

	"github.com/monarch-go/monarch/bus"
)

// BenchmarkParseFrame decodes the frame of a call to a whole mesh and of a
// call to a slice: the work done on every message received.
func BenchmarkParseFrame(b *testing.B) {
	base, _ := NewExtent(Dims{{"hosts", 4}, {"gpus", 8}})
	sliced, _ := wholeRegion(base).slice("gpus", 2, 6)
	for _, bc := range []struct {
		name string
		h    header
	}{
		{"whole", header{kind: kindActor, target: "c.m12", method: "Step", port: 77, replyTo: "c", rank: -1}},
		{"slice", header{kind: kindActor, target: "c.m12", method: "Step", port: 77, replyTo: "c", rank: -1, region: &sliced}},
		{"reply", header{kind: kindPort, port: 77, replyTo: "c-3", rank: 5}},
	} {
		w, _ := newFrame(&bc.h, bus.DefaultMaxMessage)
		w.enc.Encode([]any{1, "x"})
		data := append([]byte(nil), w.bytes()...)
		w.free()
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := parseFrame(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
