package dtensor_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
	"gorgonia.org/tensor"
)

// BenchmarkOpDispatch: 1,000 small elementwise ops on 4 procs (sent, not
// awaited; the clock stops when the last result is fetched), beside the
// same 1,000 ops on one shard here. Microseconds per op.
func BenchmarkOpDispatch(b *testing.B) {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}})
	if err != nil {
		b.Fatal(err)
	}
	defer procs.Stop(ctx)
	m := dtensor.Activate(procs)
	const n = 1000
	x, err := m.Rand(4, 4)
	if err != nil {
		b.Fatal(err)
	}
	p0, _ := procs.Extent().Point(0)
	ours := func() float64 {
		t0 := time.Now()
		y := x
		for range n {
			if y, err = y.AddScalar(1); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := dtensor.FetchShard(ctx, y, p0); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(t0).Microseconds()) / n
	}
	local := tensor.New(tensor.WithShape(4, 4), tensor.WithBacking(make([]float64, 16)))
	floor := func() float64 {
		t0 := time.Now()
		y := local
		for range n {
			r, err := tensor.Add(y, 1.0)
			if err != nil {
				b.Fatal(err)
			}
			y = r.(*tensor.Dense)
		}
		return float64(time.Since(t0).Nanoseconds()) / 1e3 / n
	}
	ours()
	var o, f []float64
	for range 5 {
		o, f = append(o, ours()), append(f, floor())
	}
	om, fm := median(o), median(f)
	fmt.Printf("BENCH dtensor-op-dispatch-4procs-us-per-op ours=%.2f floor=%.2f ratio=%.1f target<=100\n", om, fm, om/fm)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
