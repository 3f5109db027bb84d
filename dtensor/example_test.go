package dtensor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
)

// One program computes with a tensor whose shards live on the procs of a
// mesh: ops are sent to every proc and run there, on its shard; only what
// is fetched comes back here.
func Example() {
	ctx, cancel := context.WithTimeout(clientCtx, 30*time.Second)
	defer cancel()

	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer procs.Stop(ctx)
	m := dtensor.Activate(procs)

	// A batch of 4 rows split over gpus: rows 0-1 on gpus 0, rows 2-3 on
	// gpus 1. The weights are the same on every proc.
	x, err := m.Scatter("gpus", []float64{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := m.FromSlice([]float64{1, 0, 0, 10}, 2, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	// (2x2)(2x2) on each proc, then the sum of each column of its rows.
	y, err := x.MatMul(w)
	if err != nil {
		fmt.Println(err)
		return
	}
	colSums, err := y.Sum(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range procs.Extent().Points() {
		shard, err := dtensor.FetchShard(ctx, y, p)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(p, "x @ w:", shard.Float64s())
	}

	// Reduce sums the shards over gpus, proc to proc (a collective): every
	// proc holds the total over the whole batch; fetch one.
	total, err := dtensor.Reduce(ctx, colSums, []string{"gpus"}, dtensor.Sum)
	if err != nil {
		fmt.Println(err)
		return
	}
	shard, err := dtensor.FetchShard(ctx, total, procs.Extent().Points()[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("column sums of the batch:", shard.Float64s())
	// Output:
	// {gpus: 0} x @ w: [1 20 3 40]
	// {gpus: 1} x @ w: [5 60 7 80]
	// column sums of the batch: [16 200]
}
