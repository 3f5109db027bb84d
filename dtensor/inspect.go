package dtensor

import (
	"context"
	"fmt"
	"strings"

	"gorgonia.org/tensor"
)

// Inspect fetches every shard of t here, by rank of its mesh: for
// interactive debugging and tests, not for speed (the shards cross the
// bus to this process).
func Inspect(ctx context.Context, t *Tensor) ([]*tensor.Dense, error) {
	if err := t.usable("fetch"); err != nil {
		return nil, err
	}
	if err := t.mesh.flush(); err != nil {
		return nil, err
	}
	v, err := fetchFn.Call(t.mesh.procs, t.id).Get(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Dense, v.Len())
	for i, d := range v.Values() {
		if out[i], err = denseOf(d.DType, d.Shape, d.Raw); err != nil {
			return nil, fmt.Errorf("dtensor: shard %d: %w", i, err)
		}
	}
	return out, nil
}

// Show is every shard of t as text, each under its point in the mesh.
func Show(ctx context.Context, t *Tensor) (string, error) {
	shards, err := Inspect(ctx, t)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n", t)
	for r, s := range shards {
		p, _ := t.mesh.Extent().Point(r)
		fmt.Fprintf(&b, "%v:\n%v\n", p, s)
	}
	return b.String(), nil
}
