package dtensor

import (
	"context"
	"fmt"

	"gorgonia.org/tensor"
)

// Reducing several tensors at once. A data-parallel step reduces one
// gradient per parameter; each Reduce is a collective, which every proc
// of the group must reach before any goes on. ReduceEach packs the
// tensors into one vector on each proc (the op pack), reduces that once
// and takes each tensor back out of it (unpack): one collective for all.

// ReduceEach is Reduce of each of ts (of one mesh and element type) along
// dims with reduction, as one collective: the results, in ts's order.
func ReduceEach(ctx context.Context, ts []*Tensor, dims []string, reduction string) ([]*Tensor, error) {
	switch {
	case len(ts) == 0:
		return nil, nil
	case len(ts) == 1:
		r, err := Reduce(ctx, ts[0], dims, reduction)
		return []*Tensor{r}, err
	}
	for i, t := range ts {
		if t == nil {
			return nil, fmt.Errorf("dtensor: reduce of a nil tensor (%d of %d)", i, len(ts))
		}
		if err := t.usable("reduce"); err != nil {
			return nil, err
		}
		if t.mesh != ts[0].mesh {
			return nil, fmt.Errorf("%w: reduce of tensors of two meshes (%v, %v)", ErrMesh, ts[0].mesh.Extent(), t.mesh.Extent())
		}
	}
	packed, err := ts[0].apply(op{Kind: "pack"}, ts[1:]...)
	if err != nil {
		return nil, err
	}
	reduced, err := Reduce(ctx, packed, dims, reduction)
	if err != nil {
		return nil, err
	}
	out := make([]*Tensor, len(ts))
	at := 0
	for i, t := range ts {
		if out[i], err = reduced.apply(op{Kind: "unpack", Index: at, Shape: t.shape}); err != nil {
			return nil, err
		}
		at += t.shape.TotalSize()
	}
	if _, err := packed.apply(op{Kind: "drop"}, reduced); err != nil {
		return nil, err
	}
	return out, nil
}

// packShape: one vector of every input's elements.
func packShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	n := 0
	for _, s := range in {
		n += s.TotalSize()
	}
	return tensor.Shape{n}, nil
}

// pack is the inputs' elements, one after the other.
func pack(_ context.Context, _ op, in []*tensor.Dense) (*tensor.Dense, error) {
	var vals []float64
	for _, t := range in {
		vals = append(vals, values(t)...)
	}
	return withValues(in[0], []int{len(vals)}, vals), nil
}

// unpackShape: o.Shape, from o.Index on in a vector long enough.
func unpackShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	s := tensor.Shape(o.Shape)
	if len(in[0]) != 1 || o.Index < 0 || o.Index+s.TotalSize() > in[0].TotalSize() {
		return nil, fmt.Errorf("%w: unpack of %v at %d from %v", ErrShape, s, o.Index, in[0])
	}
	return s.Clone(), nil
}

// unpack is o.Shape's elements of the vector from o.Index on.
func unpack(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
	vals := values(in[0])
	n := tensor.Shape(o.Shape).TotalSize()
	return withValues(in[0], o.Shape, vals[o.Index:o.Index+n]), nil
}
