package dtensor

import (
	"context"
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Broadcasting, as NumPy does it: the elementwise ops of two tensors
// (add, sub, mul, div) take shapes that differ. The shorter shape is
// padded with ones on the left; then, axis by axis, the sizes must be
// equal or one of them 1, which stretches to the other. The result has
// the larger size on every axis: (4, 1) and (1, 1) make (4, 1), (4, 3)
// and (3) make (4, 3), (4, 1) and (1, 3) make (4, 3). Shapes that do not
// broadcast fail at the call, naming the op and both shapes.

// broadcastShape is the shape rule of the elementwise ops of two tensors.
func broadcastShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	a, b := in[0], in[1]
	n := max(len(a), len(b))
	out := make(tensor.Shape, n)
	for i := range n {
		x, y := dimFromRight(a, n-1-i), dimFromRight(b, n-1-i)
		switch {
		case x == y || y == 1:
			out[i] = x
		case x == 1:
			out[i] = y
		default:
			return nil, misfit(o, in)
		}
	}
	return out, nil
}

// dimFromRight is axis i of shape padded on the left with ones to n
// axes, counted from the right (0 is the last axis).
func dimFromRight(s tensor.Shape, i int) int {
	if i >= len(s) {
		return 1
	}
	return s[len(s)-1-i]
}

// padded is s with ones on the left to n axes.
func padded(s tensor.Shape, n int) tensor.Shape {
	out := make(tensor.Shape, n)
	for i := range out {
		out[i] = dimFromRight(s, n-1-i)
	}
	return out
}

// binaries are the elementwise ops of two tensors: their function on
// elements of each type, and their gorgonia op for Grad (broadcast).
var binaries = map[string]struct {
	f64   func(x, y float64) float64
	f32   func(x, y float32) float32
	same  func(a, b *gorgonia.Node) (*gorgonia.Node, error)
	bcast func(a, b *gorgonia.Node, left, right []byte) (*gorgonia.Node, error)
}{
	"add": {func(x, y float64) float64 { return x + y }, func(x, y float32) float32 { return x + y }, gorgonia.Add, gorgonia.BroadcastAdd},
	"sub": {func(x, y float64) float64 { return x - y }, func(x, y float32) float32 { return x - y }, gorgonia.Sub, gorgonia.BroadcastSub},
	"mul": {func(x, y float64) float64 { return x * y }, func(x, y float32) float32 { return x * y }, gorgonia.HadamardProd, gorgonia.BroadcastHadamardProd},
	"div": {func(x, y float64) float64 { return x / y }, func(x, y float32) float32 { return x / y }, gorgonia.HadamardDiv, gorgonia.BroadcastHadamardDiv},
}

// elementwise is the run function of the binary op kind: the shards of
// one shape through the tensor library, others broadcast.
func elementwise(kind string) func(context.Context, op, []*tensor.Dense) (*tensor.Dense, error) {
	fns := binaries[kind]
	return func(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
		a, b := in[0].Materialize().(*tensor.Dense), in[1].Materialize().(*tensor.Dense)
		out, err := broadcastShape(o, []tensor.Shape{a.Shape(), b.Shape()})
		if err != nil {
			return nil, err
		}
		if a.Dtype() != b.Dtype() {
			return nil, fmt.Errorf("dtensor: %s of %v and %v shards", kind, a.Dtype(), b.Dtype())
		}
		if a.Dtype() == tensor.Float32 {
			data := broadcastTo(a.Float32s(), b.Float32s(), a.Shape(), b.Shape(), out, fns.f32)
			return tensor.New(tensor.WithShape(out...), tensor.WithBacking(data)), nil
		}
		data := broadcastTo(a.Float64s(), b.Float64s(), a.Shape(), b.Shape(), out, fns.f64)
		return tensor.New(tensor.WithShape(out...), tensor.WithBacking(data)), nil
	}
}

// broadcastTo is f of a and b elementwise, each stretched to shape out
// (which broadcastShape gave).
func broadcastTo[T float32 | float64](a, b []T, as, bs, out tensor.Shape, f func(x, y T) T) []T {
	res := make([]T, out.TotalSize())
	if as.Eq(bs) {
		for i := range res {
			res[i] = f(a[i], b[i])
		}
		return res
	}
	n := len(out)
	// The strides of a and b over out's axes: 0 along a stretched axis.
	sa, sb := strides(padded(as, n)), strides(padded(bs, n))
	idx := make([]int, n)
	ia, ib := 0, 0
	for i := range res {
		res[i] = f(a[ia], b[ib])
		for ax := n - 1; ax >= 0; ax-- { // the next index, odometer-wise
			idx[ax]++
			ia += sa[ax]
			ib += sb[ax]
			if idx[ax] < out[ax] {
				break
			}
			ia -= sa[ax] * idx[ax]
			ib -= sb[ax] * idx[ax]
			idx[ax] = 0
		}
	}
	return res
}

// strides are the row-major strides of shape, 0 along its axes of size 1
// (which broadcast).
func strides(shape tensor.Shape) []int {
	s := make([]int, len(shape))
	step := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 {
			s[i] = step
		}
		step *= shape[i]
	}
	return s
}

// broadcastNode is the gorgonia node of the binary op kind on a and b,
// broadcast as broadcastShape says: the shorter padded to the other's
// axes (a reshape), then each stretched along its axes of size 1, which
// gorgonia differentiates (summing the stretched gradient back).
func broadcastNode(kind string, a, b *gorgonia.Node) (*gorgonia.Node, error) {
	fns := binaries[kind]
	as, bs := a.Shape(), b.Shape()
	if as.Eq(bs) {
		return fns.same(a, b)
	}
	n := max(len(as), len(bs))
	if n > 4 {
		return nil, fmt.Errorf("the gradient of %s broadcast over %d axes (at most 4)", kind, n)
	}
	pa, pb := padded(as, n), padded(bs, n)
	var err error
	if len(as) < n {
		if a, err = gorgonia.Reshape(a, pa); err != nil {
			return nil, err
		}
	}
	if len(bs) < n {
		if b, err = gorgonia.Reshape(b, pb); err != nil {
			return nil, err
		}
	}
	var left, right []byte
	for i := range n {
		switch {
		case pa[i] == 1 && pb[i] > 1:
			left = append(left, byte(i))
		case pb[i] == 1 && pa[i] > 1:
			right = append(right, byte(i))
		}
	}
	if left == nil && right == nil {
		return fns.same(a, b)
	}
	return fns.bcast(a, b, left, right)
}
