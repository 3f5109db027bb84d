package dtensor

import (
	"fmt"

	"github.com/monarch-go/monarch/ibverbs"
	"gorgonia.org/tensor"
)

// Element types. A tensor's shards are all float64 (the default) or all
// float32; an op reads tensors of one type and makes one of that type.
const (
	Float64 = "float64"
	Float32 = "float32"
)

// maxDims bounds the dimensions of a shard off the wire.
const maxDims = 32

// dtypeOf is a shard's element type.
func dtypeOf(t *tensor.Dense) string {
	if t.Dtype() == tensor.Float32 {
		return Float32
	}
	return Float64
}

// rawOf is a shard's element type and its data's raw bytes (no copy).
func rawOf(t *tensor.Dense) (string, []byte) {
	c := t.Materialize().(*tensor.Dense)
	if c.Dtype() == tensor.Float32 {
		return Float32, ibverbs.Bytes(c.Float32s())
	}
	return Float64, ibverbs.Bytes(c.Float64s())
}

// denseOf is a new shard of dtype and shape holding a copy of raw. The
// shape comes off the wire: every dimension must be positive and their
// product no more than the bytes hold (no overflow).
func denseOf(dtype string, shape []int, raw []byte) (*tensor.Dense, error) {
	if len(shape) == 0 || len(shape) > maxDims {
		return nil, fmt.Errorf("dtensor: a shard of %d dimensions", len(shape))
	}
	n := 1
	for _, d := range shape {
		if d <= 0 || d > len(raw) || n > len(raw)/d {
			return nil, fmt.Errorf("dtensor: a shard of shape %v with %d bytes", tensor.Shape(shape), len(raw))
		}
		n *= d
	}
	switch dtype {
	case Float32:
		if len(raw) != 4*n {
			return nil, fmt.Errorf("dtensor: a float32 shard of shape %v with %d bytes", tensor.Shape(shape), len(raw))
		}
		data := make([]float32, n)
		copy(ibverbs.Bytes(data), raw)
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), nil
	case Float64, "":
		if len(raw) != 8*n {
			return nil, fmt.Errorf("dtensor: a float64 shard of shape %v with %d bytes", tensor.Shape(shape), len(raw))
		}
		data := make([]float64, n)
		copy(ibverbs.Bytes(data), raw)
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), nil
	}
	return nil, fmt.Errorf("dtensor: element type %q (float64 or float32)", dtype)
}

// filledOf is a shard of dtype and shape whose values next gives.
func filledOf(dtype string, shape []int, next func() float64) *tensor.Dense {
	n := product(shape)
	if dtype == Float32 {
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(next())
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	}
	data := make([]float64, n)
	for i := range data {
		data[i] = next()
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// mapped is a copy of t with f applied to every element (in float64 for
// a float32 shard, rounded back).
func mapped(t *tensor.Dense, f func(float64) float64) *tensor.Dense {
	c := t.Materialize().(*tensor.Dense).Clone().(*tensor.Dense)
	if c.Dtype() == tensor.Float32 {
		data := c.Float32s()
		for i, v := range data {
			data[i] = float32(f(float64(v)))
		}
		return c
	}
	data := c.Float64s()
	for i, v := range data {
		data[i] = f(v)
	}
	return c
}

// values is t's elements as float64s (a copy for float32).
func values(t *tensor.Dense) []float64 {
	c := t.Materialize().(*tensor.Dense)
	if c.Dtype() == tensor.Float32 {
		out := make([]float64, c.Len())
		for i, v := range c.Float32s() {
			out[i] = float64(v)
		}
		return out
	}
	return c.Float64s()
}

// withValues is a shard of t's type and the given shape holding vals.
func withValues(like *tensor.Dense, shape []int, vals []float64) *tensor.Dense {
	i := 0
	return filledOf(dtypeOf(like), shape, func() float64 { i++; return vals[i-1] })
}

// scalar is v as an element of t's type, for tensor's scalar ops.
func scalar(t *tensor.Dense, v float64) any {
	if t.Dtype() == tensor.Float32 {
		return float32(v)
	}
	return v
}
