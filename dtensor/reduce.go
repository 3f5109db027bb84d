package dtensor

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gorgonia.org/tensor"
)

// Reductions across shards.
const (
	Sum  = "sum"
	Mean = "mean"
	Max  = "max"
	Min  = "min"
)

// Reduce combines the shards along dims of the mesh (all of them if dims
// is empty) with op, elementwise: every proc of a group (the procs that
// differ only along dims) ends up with the group's result, as a new tensor
// (an all-reduce). The shards travel through this process.
func Reduce(ctx context.Context, t *Tensor, dims []string, op string) (*Tensor, error) {
	switch op {
	case Sum, Mean, Max, Min:
	default:
		return nil, fmt.Errorf("dtensor: reduce op %q: want sum, mean, max or min", op)
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
	out := &Tensor{mesh: t.mesh, id: newID(), shape: t.shape.Clone()}
	vals := shards.Values()
	points := ext.Points()
	for _, ranks := range groups {
		acc := slices.Clone(vals[ranks[0]].Data)
		for _, r := range ranks[1:] {
			combine(acc, vals[r].Data, op)
		}
		if op == Mean {
			for i := range acc {
				acc[i] /= float64(len(ranks))
			}
		}
		for _, r := range ranks {
			o := opPut(out.id, t.shape, acc)
			if err := opFn.Broadcast(t.mesh.procs.SliceAt(points[r]), o); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func opPut(id uint64, shape tensor.Shape, data []float64) op {
	return op{Kind: "put", Out: id, Shape: shape.Clone(), Data: data}
}

func combine(acc, x []float64, op string) {
	for i := range acc {
		switch op {
		case Sum, Mean:
			acc[i] += x[i]
		case Max:
			acc[i] = math.Max(acc[i], x[i])
		case Min:
			acc[i] = math.Min(acc[i], x[i])
		}
	}
}
