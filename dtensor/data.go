package dtensor

import (
	"context"
	"fmt"
	"slices"

	"github.com/monarch-go/monarch/ibverbs"
	"gorgonia.org/tensor"
)

// Tensors from the client's data. The data travels in the op that makes
// the tensor (the op "data"), as its raw little-endian bytes: the whole
// slice to every proc (FromSlice), or each proc its own part (Scatter,
// FromShards). A length that does not match the shape, or a shape that
// does not split over the mesh, fails at the call and nothing is sent.

// FromSlice is a tensor of the given shape holding data, a []float64 or
// a []float32 in row-major order (its element type is the tensor's): the
// same shard on every proc, as parameters start. len(data) must be the
// shape's number of elements.
func (m *Mesh) FromSlice(data any, shape ...int) (*Tensor, error) {
	dtype, raw, n, err := rawSlice(data)
	if err != nil {
		return nil, err
	}
	if err := fits("fromslice", n, shape); err != nil {
		return nil, err
	}
	return m.record(op{Kind: "data", Shape: shape, DType: dtype, Raw: slices.Clone(raw)}, nil, nil)
}

// Scatter splits data, a tensor of the given shape ([]float64 or
// []float32, row-major), along its first axis over the mesh dimension
// dim: the proc at index i of dim holds the i-th of its n equal parts, a
// shard of shape (shape[0]/n, shape[1:]...), and procs that differ only
// along the other dimensions hold the same part (a batch of data split
// over the data-parallel dimension). n must divide shape[0].
func (m *Mesh) Scatter(dim string, data any, shape ...int) (*Tensor, error) {
	dtype, raw, total, err := rawSlice(data)
	if err != nil {
		return nil, err
	}
	ext := m.Extent()
	n, ok := ext.Size(dim)
	if !ok {
		return nil, fmt.Errorf("%w: scatter along %q: no such dimension in %v", ErrShape, dim, ext)
	}
	if err := fits("scatter", total, shape); err != nil {
		return nil, err
	}
	if shape[0]%n != 0 {
		return nil, fmt.Errorf("%w: scatter of %v along %q of %d procs (the first axis must divide)", ErrShape, tensor.Shape(shape), dim, n)
	}
	part := slices.Clone(shape)
	part[0] /= n
	size := len(raw) / n
	points := ext.Points()
	return m.record(op{Kind: "data", Shape: part, DType: dtype}, nil, func(r int, o *op) {
		i, _ := points[r].Get(dim)
		o.Raw = slices.Clone(raw[i*size : (i+1)*size])
	})
}

// FromShards is a tensor whose shard on the proc of rank r is shards[r],
// each of the given shape: shards is a [][]float64 or a [][]float32 with
// one slice per proc of the mesh.
func (m *Mesh) FromShards(shards any, shape ...int) (*Tensor, error) {
	var parts []any
	switch s := shards.(type) {
	case [][]float64:
		for _, p := range s {
			parts = append(parts, p)
		}
	case [][]float32:
		for _, p := range s {
			parts = append(parts, p)
		}
	default:
		return nil, fmt.Errorf("dtensor: shards of type %T (want [][]float64 or [][]float32)", shards)
	}
	if len(parts) != m.Extent().NumRanks() {
		return nil, fmt.Errorf("%w: %d shards for a mesh of %d procs (%v)", ErrShape, len(parts), m.Extent().NumRanks(), m.Extent())
	}
	raws := make([][]byte, len(parts))
	var dtype string
	for r, p := range parts {
		dt, raw, n, err := rawSlice(p)
		if err != nil {
			return nil, err
		}
		if err := fits(fmt.Sprintf("fromshards: shard %d", r), n, shape); err != nil {
			return nil, err
		}
		raws[r], dtype = slices.Clone(raw), dt
	}
	return m.record(op{Kind: "data", Shape: shape, DType: dtype}, nil, func(r int, o *op) { o.Raw = raws[r] })
}

// rawSlice is data's element type, its raw bytes (not a copy) and its
// length.
func rawSlice(data any) (dtype string, raw []byte, n int, err error) {
	switch d := data.(type) {
	case []float64:
		return Float64, ibverbs.Bytes(d), len(d), nil
	case []float32:
		return Float32, ibverbs.Bytes(d), len(d), nil
	}
	return "", nil, 0, fmt.Errorf("dtensor: data of type %T (want []float64 or []float32)", data)
}

// fits checks that n elements make a tensor of shape.
func fits(what string, n int, shape []int) error {
	if _, err := created(op{Kind: what, Shape: shape}, nil); err != nil {
		return err
	}
	if product(shape) != n {
		return fmt.Errorf("%w: %s of %d elements to shape %v", ErrShape, what, n, tensor.Shape(shape))
	}
	return nil
}

// fromData is the op "data" on a proc: its shard, from the bytes the op
// carries.
func fromData(_ context.Context, o op, _ []*tensor.Dense) (*tensor.Dense, error) {
	return denseOf(o.DType, o.Shape, o.Raw)
}
