package actorrt_test

import (
	"bytes"
	"slices"
	"testing"
	"unsafe"

	"github.com/monarch-go/monarch/actorrt"
)

// TestRecycleResults: a large result given back (Recycle) is the memory
// the next result of its size is read into, and that result is whole and
// right; memory given back twice, a small result's and memory of the
// program's own are refused. A numeric slice likewise.
func TestRecycleResults(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"procs", 1}})
	echo := spawn[Echo](t, procs, "recycle-echo")
	nums := spawn[Numbers](t, procs, "recycle-numbers")
	echoBytes, f32 := actorrt.Method1((*Echo).Bytes), actorrt.Method1((*Numbers).Float32s)

	at := func(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
	var was uintptr
	for round := range 3 {
		data := bytes.Repeat([]byte{byte(round + 1), 7, byte(round)}, 1<<20)
		got, err := echoBytes.CallOne(echo, data).Get(ctx)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d: echo of %d bytes: %d back, equal %v, %v", round, len(data), len(got), bytes.Equal(got, data), err)
		}
		if round > 0 && at(got) != was {
			t.Errorf("round %d: the result was not read into the memory given back", round)
		}
		was = at(got)
		if !actorrt.Recycle(got[100:]) {
			t.Fatalf("round %d: a large result's memory was not taken back", round)
		}
		if actorrt.Recycle(got) {
			t.Fatalf("round %d: a result's memory was taken back twice", round)
		}
	}
	small, err := echoBytes.CallOne(echo, make([]byte, 100<<10)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if actorrt.Recycle(small) || actorrt.Recycle(make([]byte, 4<<20)) {
		t.Fatal("memory no message was read into out of band was taken")
	}

	var wasF uintptr
	for round := range 2 {
		v := make([]float32, 1<<20)
		for i := range v {
			v[i] = float32(i*(round+1)) / 3
		}
		got, err := f32.CallOne(nums, v).Get(ctx)
		if err != nil || !slices.Equal(got, v) {
			t.Fatalf("round %d: []float32 of %d: %d back, %v", round, len(v), len(got), err)
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(got)))
		if round > 0 && p != wasF {
			t.Errorf("round %d: the []float32 result was not read into the memory given back", round)
		}
		wasF = p
		if !actorrt.Recycle(got) {
			t.Fatalf("round %d: a large []float32 result's memory was not taken back", round)
		}
	}
}
