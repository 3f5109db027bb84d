package dtensor

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// Reductions across shards.
const (
	Sum  = "sum"
	Mean = "mean"
	Max  = "max"
	Min  = "min"
)

// Reduce combines the shards along dims of the mesh (all of them if dims
// is empty) with reduction (Sum, Mean, Max or Min), elementwise: every
// proc of a group (the procs that differ only along dims) ends up with the
// group's result, as a new tensor (an all-reduce). The shards travel
// through this process.
func Reduce(ctx context.Context, t *Tensor, dims []string, reduction string) (*Tensor, error) {
	switch reduction {
	case Sum, Mean, Max, Min:
	default:
		return nil, fmt.Errorf("dtensor: reduce op %q: want sum, mean, max or min", reduction)
	}
	ext := t.mesh.Extent()
	if len(dims) == 0 {
		dims = ext.Names()
	}
	for _, d := range dims {
		if _, ok := ext.Size(d); !ok {
			return nil, fmt.Errorf("%w: no dimension %q in %v", ErrShape, d, ext)
		}
	}
	shards, err := fetchFn.Call(t.mesh.procs, t.id).Get(ctx)
	if err != nil {
		return nil, err
	}
	// Group the points by their coordinates outside dims.
	groups := map[string][]int{}
	for p := range shards.Items() {
		var key []int
		for _, name := range ext.Names() {
			if !slices.Contains(dims, name) {
				c, _ := p.Get(name)
				key = append(key, c)
			}
		}
		k := fmt.Sprint(key)
		groups[k] = append(groups[k], p.Rank())
	}
	// Every proc of a group gets the group's result.
	vals := shards.Values()
	results := make([][]float64, len(vals))
	for _, ranks := range groups {
		acc := slices.Clone(vals[ranks[0]].Data)
		for _, r := range ranks[1:] {
			combine(acc, vals[r].Data, reduction)
		}
		if reduction == Mean {
			for i := range acc {
				acc[i] /= float64(len(ranks))
			}
		}
		for _, r := range ranks {
			results[r] = acc
		}
	}
	put := func(r int, o *op) { o.Data = results[r] }
	return t.mesh.record(op{Kind: "put", Shape: t.shape}, nil, put)
}

func combine(acc, x []float64, reduction string) {
	for i := range acc {
		switch reduction {
		case Sum, Mean:
			acc[i] += x[i]
		case Max:
			acc[i] = math.Max(acc[i], x[i])
		case Min:
			acc[i] = math.Min(acc[i], x[i])
		}
	}
}
