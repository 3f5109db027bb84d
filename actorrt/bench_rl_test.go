package actorrt_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/ibverbs"
)

// RLGen is a generator of an RL loop as far as its weights go: the trainer
// publishes them each step, as an endpoint argument (SetWeights) or as a
// handle to a registered buffer that the generator reads one-sided (Pull).
type RLGen struct{ policy []float32 }

func (g *RLGen) SetWeights(ctx *actorrt.Context, w []float32) (float32, error) {
	actorrt.Recycle(g.policy) // the last step's weights: the next are read into their memory
	g.policy = w
	return w[len(w)-1], nil
}

func (g *RLGen) Pull(ctx *actorrt.Context, h ibverbs.Handle) (float32, error) {
	if len(g.policy)*4 != h.Size {
		g.policy = make([]float32, h.Size/4)
	}
	if err := h.ReadInto(ctx, unsafe.Slice((*byte)(unsafe.Pointer(&g.policy[0])), h.Size)); err != nil {
		return 0, err
	}
	return g.policy[len(g.policy)-1], nil
}

// BenchmarkRLWeights: the trainer publishes 4 MiB of []float32 weights to
// 4 generators on 4 procs as an endpoint argument (a Call, which waits for
// all 4), beside the floor: the same weights kept in a registered
// ibverbs buffer (as examples/getting_started/rdma.go keeps them), whose
// handle the generators are called with and read one-sided into weights
// of their own. Milliseconds a step; the target is within 2x the buffers.
//
// The argument reaches each generator as 4 MiB of its own (read out of
// band, then used in place), which the generator keeps until the next
// step's arrive and then gives back (Recycle), so that those are read
// into memory already faulted in, as the floor reads into weights the
// generator reuses. On a VM whose page faults are slow, faulting fresh
// pages in was most of the gap (4.5x without Recycle).
func BenchmarkRLWeights(b *testing.B) {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gens", 4}})
	if err != nil {
		b.Fatal(err)
	}
	defer procs.Stop(ctx)
	gens, err := actorrt.Spawn[RLGen](ctx, procs, "rl-gens")
	if err != nil {
		b.Fatal(err)
	}
	const n = 1 << 20 // 4 MiB of float32
	w := make([]float32, n)
	buf, err := ibverbs.NewBuffer(4 * n)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	inBuf := unsafe.Slice((*float32)(unsafe.Pointer(&buf.Bytes()[0])), n)
	step := float32(0)
	check := func(v actorrt.ValueMesh[float32], err error) {
		if err != nil {
			b.Fatal(err)
		}
		for i, x := range v.Values() {
			if x != step {
				b.Fatalf("generator %d has the weights of step %v, want %v", i, x, step)
			}
		}
	}
	set, pull := actorrt.Method1((*RLGen).SetWeights), actorrt.Method1((*RLGen).Pull)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ours := func() float64 {
		step++
		w[n-1] = step // the optimizer's step, outside the timing
		t0 := time.Now()
		check(set.Call(gens, w).Get(ctx))
		return ms(time.Since(t0))
	}
	floor := func() float64 {
		step++
		inBuf[n-1] = step
		t0 := time.Now()
		check(pull.Call(gens, buf.Handle()).Get(ctx))
		return ms(time.Since(t0))
	}
	o, f := alternate(b, 16, ours, floor)
	report(b, "rl-weights-4MiB-4gens-arg-vs-buffers-ms", o, f, "ms", "<=", 2)
}
