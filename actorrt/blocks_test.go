package actorrt_test

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
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

// Keeper keeps the last []float32 it was sent.
type Keeper struct{ kept []float32 }

func (k *Keeper) Keep(ctx *actorrt.Context, v []float32) error { k.kept = v; return nil }
func (k *Keeper) Len(ctx *actorrt.Context) (int, error)        { return len(k.kept), nil }

// Scribble sums what it keeps, then overwrites it with -1s: a member that
// shared its neighbour's copy would see the neighbour's -1s.
func (k *Keeper) Scribble(ctx *actorrt.Context) (float64, error) {
	s := 0.0
	for i, x := range k.kept {
		s += float64(x)
		k.kept[i] = -1
	}
	return s, nil
}

// TestLargeBlockToSeveral: a large []float32 sent once to several actors
// (Broadcast, Call), four in one proc and two in each of two procs, or to
// an actor in the sender's own proc, reaches each as a copy of its own: a
// member that overwrites its slice changes no other member's, nor the
// sender's. (Only a payload that one actor alone receives is used in
// place.)
func TestLargeBlockToSeveral(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	v := make([]float32, 1<<19) // 2 MiB: out of band, and past wire.ShareMin
	want := 0.0
	for i := range v {
		v[i] = float32(i % 1000)
		want += float64(v[i])
	}
	orig := slices.Clone(v)
	keep, length, scribble := actorrt.VoidMethod1((*Keeper).Keep), actorrt.Method((*Keeper).Len), actorrt.Method((*Keeper).Scribble)
	check := func(name string, m *actorrt.ActorMesh[Keeper], procs, perProc int) {
		t.Helper()
		// Len after the send, to the same mesh: every member has it.
		lens, err := length.Call(m).Get(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, n := range lens.Values() {
			if n != len(v) {
				t.Fatalf("%s: member %d keeps %d float32s, want %d", name, i, n, len(v))
			}
		}
		for p := range procs {
			for a := range perProc {
				got, err := scribble.CallOne(m.At("procs", p).At("actors", a)).Get(ctx)
				if err != nil || got != want {
					t.Errorf("%s: member (%d, %d) summed %v, want %v (%v): it saw another's writes", name, p, a, got, want, err)
				}
			}
		}
		if !slices.Equal(v, orig) {
			t.Fatalf("%s: the sender's slice changed", name)
		}
	}
	for _, c := range []struct{ procs, perProc int }{{1, 4}, {2, 2}} {
		procs := spawnProcs(t, actorrt.Dims{{"procs", c.procs}})
		for _, broadcast := range []bool{true, false} {
			name := fmt.Sprintf("%d procs × %d, broadcast %v", c.procs, c.perProc, broadcast)
			m, err := actorrt.SpawnPerProc[Keeper](ctx, procs, fmt.Sprintf("keepers-%d-%v", c.procs, broadcast), actorrt.Dims{{"actors", c.perProc}})
			if err != nil {
				t.Fatal(err)
			}
			if broadcast {
				err = keep.Broadcast(m, v)
			} else {
				_, err = keep.Call(m, v).Get(ctx)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			check(name, m, c.procs, c.perProc)
		}
	}
	// An actor in the sender's own proc.
	local, err := actorrt.SpawnPerProc[Keeper](ctx, actorrt.ThisProc(ctx), "keeper-here", actorrt.Dims{{"actors", 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keep.CallOne(local, v).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := scribble.CallOne(local).Get(ctx); err != nil || got != want {
		t.Errorf("in this proc: summed %v, want %v (%v)", got, want, err)
	}
	if !slices.Equal(v, orig) {
		t.Fatal("in this proc: the actor's writes reached the sender's slice")
	}
}
