package actorrt_test

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/monarch-go/monarch/actorrt"
)

// Numbers takes and returns numeric slices, which travel as blocks of
// little-endian bytes (internal/wire, blocks.go).
type Numbers struct{}

// Weights is a named type over []float32: a block too.
type Weights []float32

// Rollout holds blocks as fields, slices and arrays.
type Rollout struct {
	Step    int
	Obs     Weights
	Rewards []float64
	Done    []bool
	Actions []int16
	Shape   [2]int64
	Seeds   [3]uint64
}

func (*Numbers) Float32s(ctx *actorrt.Context, v []float32) ([]float32, error) { return v, nil }
func (*Numbers) Float64s(ctx *actorrt.Context, v []float64) ([]float64, error) { return v, nil }
func (*Numbers) Weights(ctx *actorrt.Context, v Weights) (Weights, error)      { return v, nil }
func (*Numbers) Rollout(ctx *actorrt.Context, r Rollout) (Rollout, error) {
	r.Step++
	return r, nil
}

// TestNumericBlocks: numeric slices (top-level arguments and results, a
// named type, struct fields, arrays) round-trip between two procs with
// every value in place, small ones in the frame and large ones out of
// band; nil stays nil.
func TestNumericBlocks(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"procs", 1}})
	nums := spawn[Numbers](t, procs, "blocks")
	f32, f64 := actorrt.Method1((*Numbers).Float32s), actorrt.Method1((*Numbers).Float64s)
	for _, n := range []int{0, 1, 7, 1 << 10, 300 << 10, 3<<20 + 1} {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i)*0.5 - 1e6
		}
		if n > 0 {
			v[0] = float32(math.Inf(-1))
		}
		got, err := f32.CallOne(nums, v).Get(ctx)
		if err != nil || !reflect.DeepEqual(got, v) {
			t.Fatalf("[]float32 of %d: %d back, %v", n, len(got), err)
		}
		w := make([]float64, n)
		for i := range w {
			w[i] = math.Pi * float64(i-n/2)
		}
		got64, err := f64.CallOne(nums, w).Get(ctx)
		if err != nil || !reflect.DeepEqual(got64, w) {
			t.Fatalf("[]float64 of %d: %d back, %v", n, len(got64), err)
		}
	}
	if got, err := f32.CallOne(nums, nil).Get(ctx); err != nil || got != nil {
		t.Errorf("nil []float32: got %#v, %v", got, err)
	}
	wv := Weights{1, 2, 3}
	if got, err := actorrt.Method1((*Numbers).Weights).CallOne(nums, wv).Get(ctx); err != nil || !reflect.DeepEqual(got, wv) {
		t.Errorf("Weights: got %v, %v", got, err)
	}
	r := Rollout{Step: 1, Obs: make(Weights, 100<<10), Rewards: []float64{0.5, -1}, Done: []bool{false, true, true},
		Actions: []int16{-3, 300}, Shape: [2]int64{-1, 1 << 40}, Seeds: [3]uint64{math.MaxUint64, 0, 9}}
	for i := range r.Obs {
		r.Obs[i] = float32(i)
	}
	got, err := actorrt.Method1((*Numbers).Rollout).CallOne(nums, r).Get(ctx)
	r.Step++
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("Rollout: got step %d, %d obs, %v %v %v %v %v; %v", got.Step, len(got.Obs), got.Rewards, got.Done, got.Actions, got.Shape, got.Seeds, err)
	}
}

// BenchmarkFloat32Arg64MiB: a 64 MiB []float32 argument sent to an actor
// in another proc, which returns it, beside the same bytes as a []byte
// (Echo.Bytes). Milliseconds a round trip; the target is within 1.5x the
// bytes.
func BenchmarkFloat32Arg64MiB(b *testing.B) {
	ctx := clientCtx
	nums := spawnRemote[Numbers](b, "float32-arg")
	echo := spawnRemote[Echo](b, "float32-floor")
	v := make([]float32, largeSize/4)
	for i := range v {
		v[i] = float32(i) * 0.25
	}
	raw := bytes.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), largeSize))
	f32, echoBytes := actorrt.Method1((*Numbers).Float32s), actorrt.Method1((*Echo).Bytes)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ours := func() float64 {
		t0 := time.Now()
		got, err := f32.CallOne(nums, v).Get(ctx)
		d := time.Since(t0)
		if err != nil || len(got) != len(v) || got[len(v)-1] != v[len(v)-1] {
			b.Fatalf("echo of %d float32s: %d back, %v", len(v), len(got), err)
		}
		return ms(d)
	}
	floor := func() float64 {
		t0 := time.Now()
		got, err := echoBytes.CallOne(echo, raw).Get(ctx)
		d := time.Since(t0)
		if err != nil || len(got) != len(raw) {
			b.Fatalf("echo of %d bytes: %d back, %v", len(raw), len(got), err)
		}
		return ms(d)
	}
	o, f := alternate(b, 6, ours, floor)
	report(b, "float32-arg-64MiB-ms", o, f, "ms", "<=", 1.5)
}
