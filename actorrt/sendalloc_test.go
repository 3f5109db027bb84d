package actorrt_test

import (
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

// TestAdverbArgsNotBoxed: an adverb's typed arguments reach the frame
// without an allocation of their own (no []any, no box per argument): a
// Broadcast with a 32-byte []byte, or with an int64 and a []byte,
// allocates no more than one without arguments, which allocates nothing
// (the closure that hears of a queued call's loss is made only for a
// queued call). The runtime's own
// goroutines allocate too, so the averages over many sends are compared.
func TestAdverbArgsNotBoxed(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's instrumentation allocates on the path; run without -race")
	}
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	rec := spawn[Recorder](t, procs, "noboxing")
	hit := actorrt.VoidMethod((*Recorder).Hit)
	hitData := actorrt.VoidMethod1((*Recorder).HitData)
	blob := actorrt.VoidMethod2((*Recorder).NoteBlob)
	payload := []byte("0123456789abcdef0123456789abcdef")
	sevens := bytes32(7)
	const runs = 2000
	per := func(fn func() error) float64 {
		for range 200 { // warm the pools and the run writer
			if err := fn(); err != nil {
				t.Fatal(err)
			}
		}
		return testing.AllocsPerRun(runs, func() {
			if err := fn(); err != nil {
				t.Fatal(err)
			}
		})
	}
	bare := per(func() error { return hit.Broadcast(rec) })
	one := per(func() error { return hitData.Broadcast(rec, payload) })
	two := per(func() error { return blob.Broadcast(rec, 7, sevens) })
	t.Logf("allocations per Broadcast: none %.0f, a []byte %.0f, an int64 and a []byte %.0f", bare, one, two)
	if bare >= 1 {
		t.Errorf("a Broadcast without arguments: %.0f allocations", bare)
	}
	if one > bare || two > bare {
		t.Errorf("arguments allocate: a Broadcast without arguments %.0f allocations, with a []byte %.0f, with an int64 and a []byte %.0f", bare, one, two)
	}
	if _, err := actorrt.Method((*Recorder).Count).CallOne(rec).Get(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// bytes32 is 32 bytes, each b.
func bytes32(b byte) []byte {
	p := make([]byte, 32)
	for i := range p {
		p[i] = b
	}
	return p
}
