package dtensor

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"gorgonia.org/tensor"
)

// opKind is one op of the table: how a proc computes it, and the shape
// its result has. Adding an op is adding an entry to ops and the public
// function that records it; nothing else dispatches on the name.
type opKind struct {
	// inputs is how many tensors the op reads (op.In); -1: one or more.
	inputs int
	// refs: the op reads its inputs' ids, not their shards (which may be
	// errors); run gets none, and only the client checks the shapes.
	refs bool
	// shape is the shape of the op's result shards, from its inputs'
	// shard shapes and its parameters, or an ErrShape error that names
	// the op and the shapes. The client calls it when it records the op,
	// so a misfit fails at the call. A nil shape without an error: the op
	// makes no tensor (drop).
	shape func(o op, in []tensor.Shape) (tensor.Shape, error)
	// run computes this proc's result shard from its input shards (as
	// many as inputs) and the op's parameters.
	run func(ctx context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error)
}

// ops is the table of ops, by the name that travels in op.Kind. It is
// never written after package initialisation.
var ops = map[string]opKind{
	"rand": {shape: created, run: func(_ context.Context, o op, _ []*tensor.Dense) (*tensor.Dense, error) {
		r := rand.New(rand.NewPCG(o.Seed, uint64(o.Rank)))
		return filledOf(o.DType, o.Shape, r.Float64), nil
	}},
	"full": {shape: created, run: func(_ context.Context, o op, _ []*tensor.Dense) (*tensor.Dense, error) {
		return filledOf(o.DType, o.Shape, func() float64 { return o.Value }), nil
	}},
	"matmul": {inputs: 2, shape: matmulShape, run: func(_ context.Context, _ op, in []*tensor.Dense) (*tensor.Dense, error) {
		return dense(tensor.MatMul(in[0], in[1]))
	}},
	"add": {inputs: 2, shape: broadcastShape, run: elementwise("add")},
	"mul": {inputs: 2, shape: broadcastShape, run: elementwise("mul")},
	"scale": {inputs: 1, shape: sameShape, run: func(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
		return dense(tensor.Mul(in[0], scalar(in[0], o.Value)))
	}},
	"transpose": {inputs: 1, shape: transposeShape, run: func(_ context.Context, _ op, in []*tensor.Dense) (*tensor.Dense, error) {
		c := in[0].Clone().(*tensor.Dense)
		if err := c.T(); err != nil {
			return nil, err
		}
		if err := c.Transpose(); err != nil { // materialise the new layout
			return nil, err
		}
		return c, nil
	}},
	"relu": {inputs: 1, shape: sameShape, run: func(_ context.Context, _ op, in []*tensor.Dense) (*tensor.Dense, error) {
		return mapped(in[0], func(x float64) float64 { return max(x, 0) }), nil
	}},
	"row": {inputs: 1, shape: rowShape, run: func(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
		s, err := in[0].Slice(tensor.S(o.Index))
		if err != nil {
			return nil, err
		}
		return s.(*tensor.Dense).Materialize().(*tensor.Dense), nil
	}},
	"sub": {inputs: 2, shape: broadcastShape, run: elementwise("sub")},
	"div": {inputs: 2, shape: broadcastShape, run: elementwise("div")},
	"shift": {inputs: 1, shape: sameShape, run: func(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
		return mapped(in[0], func(x float64) float64 { return x + o.Value }), nil
	}},
	"unary": {inputs: 1, shape: unaryShape, run: func(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
		return mapped(in[0], unaries[o.Name]), nil
	}},
	"softmax": {inputs: 1, shape: sameShape, run: func(_ context.Context, _ op, in []*tensor.Dense) (*tensor.Dense, error) {
		shape := in[0].Shape()
		last := shape[len(shape)-1]
		data := slices.Clone(values(in[0]))
		for lo := 0; lo < len(data); lo += last {
			row := data[lo : lo+last]
			top := row[0]
			for _, v := range row {
				top = math.Max(top, v)
			}
			sum := 0.0
			for i, v := range row {
				row[i] = math.Exp(v - top) // shifted: no overflow
				sum += row[i]
			}
			for i := range row {
				row[i] /= sum
			}
		}
		return withValues(in[0], shape, data), nil
	}},
	"sum": {inputs: 1, shape: axisShape, run: func(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
		return alongAxis(in[0], o.Index, o.Value != 0), nil
	}},
	"reshape": {inputs: 1, shape: reshapeShape, run: func(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
		c := in[0].Materialize().(*tensor.Dense).Clone().(*tensor.Dense)
		if err := c.Reshape(o.Shape...); err != nil {
			return nil, err
		}
		return c, nil
	}},
	"allreduce":     {inputs: 1, shape: sameShape, run: allReduce},
	"pack":          {inputs: -1, shape: packShape, run: pack},
	"unpack":        {inputs: 1, shape: unpackShape, run: unpack},
	"grad":          {inputs: 2, shape: gradShape, run: runGrad},
	"gradfree":      {shape: noResult, run: gradFree},
	"import":        {shape: created, run: importShard},
	"data":          {shape: created, run: fromData},
	"optimize":      {inputs: 2, shape: optimizeShape, run: optimize},
	"optfree":       {shape: noResult, run: optFree},
	"reducescatter": {inputs: 1, shape: scatterShape, run: reduceScatter},
	"rref":          {inputs: 1, shape: rrefShape, run: runRRef},
	"drop": {inputs: -1, refs: true, shape: noResult, run: func(_ context.Context, o op, _ []*tensor.Dense) (*tensor.Dense, error) {
		store.Lock()
		for _, id := range o.In {
			delete(store.m, id)
		}
		store.Unlock()
		return nil, nil
	}},
}

// lookup is the op named o.Kind, if o has as many inputs as it reads.
func lookup(o op) (opKind, error) {
	k, ok := ops[o.Kind]
	switch {
	case !ok:
		return opKind{}, fmt.Errorf("dtensor: unknown op %q", o.Kind)
	case k.inputs < 0 && len(o.In) == 0:
		return opKind{}, fmt.Errorf("dtensor: op %q without inputs", o.Kind)
	case k.inputs >= 0 && len(o.In) != k.inputs:
		return opKind{}, fmt.Errorf("dtensor: op %q: %d inputs, want %d", o.Kind, len(o.In), k.inputs)
	}
	return k, nil
}

// Shape rules.

// misfit is the error of a shape rule: the op and its inputs' shapes.
func misfit(o op, in []tensor.Shape) error {
	s := make([]string, len(in))
	for i, sh := range in {
		s[i] = fmt.Sprint(sh)
	}
	return fmt.Errorf("%w: %s of %s", ErrShape, o.Kind, strings.Join(s, " and "))
}

// created: a new tensor of shape o.Shape, which must have a dimension and
// no empty one.
func created(o op, _ []tensor.Shape) (tensor.Shape, error) {
	shape := tensor.Shape(o.Shape)
	ok := len(shape) > 0
	for _, d := range shape {
		ok = ok && d > 0
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s of shape %v", ErrShape, o.Kind, shape)
	}
	return shape.Clone(), nil
}

// sameShape: elementwise, every input of one shape, which the result has.
func sameShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	for _, s := range in[1:] {
		if !s.Eq(in[0]) {
			return nil, misfit(o, in)
		}
	}
	return in[0].Clone(), nil
}

// matmulShape: (n x k) times (k x m) is n x m.
func matmulShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	a, b := in[0], in[1]
	if len(a) != 2 || len(b) != 2 || a[1] != b[0] {
		return nil, misfit(o, in)
	}
	return tensor.Shape{a[0], b[1]}, nil
}

// transposeShape: a matrix n x m becomes m x n.
func transposeShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 2 {
		return nil, misfit(o, in)
	}
	return tensor.Shape{in[0][1], in[0][0]}, nil
}

// rowShape: row o.Index of a tensor of two or more dimensions drops the
// first.
func rowShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) < 2 || o.Index < 0 || o.Index >= in[0][0] {
		return nil, fmt.Errorf("%w: %s %d of %v", ErrShape, o.Kind, o.Index, in[0])
	}
	return in[0][1:].Clone(), nil
}

// unaryShape: an elementwise function the table of unaries has.
func unaryShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	if unaries[o.Name] == nil {
		return nil, fmt.Errorf("dtensor: unknown function %q", o.Name)
	}
	return in[0].Clone(), nil
}

// axisShape: a reduction over axis o.Index drops it (a vector becomes a
// one-element vector).
func axisShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	if o.Index < 0 || o.Index >= len(in[0]) {
		return nil, fmt.Errorf("%w: %s over axis %d of %v", ErrShape, o.Kind, o.Index, in[0])
	}
	out := append(in[0][:o.Index:o.Index].Clone(), in[0][o.Index+1:]...)
	if len(out) == 0 {
		out = tensor.Shape{1}
	}
	return out, nil
}

// reshapeShape: o.Shape, of as many elements.
func reshapeShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	if product(o.Shape) != in[0].TotalSize() || len(o.Shape) == 0 {
		return nil, fmt.Errorf("%w: reshape of %v to %v", ErrShape, in[0], tensor.Shape(o.Shape))
	}
	return tensor.Shape(o.Shape).Clone(), nil
}

// noResult: the op makes no tensor.
func noResult(op, []tensor.Shape) (tensor.Shape, error) { return nil, nil }

// Helpers of the run functions.

func dense(t tensor.Tensor, err error) (*tensor.Dense, error) {
	if err != nil {
		return nil, err
	}
	d, ok := t.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("dtensor: result is a %T", t)
	}
	return d, nil
}

// unaries are the elementwise functions of the op "unary", by name.
var unaries = map[string]func(float64) float64{
	"exp":     math.Exp,
	"log":     math.Log,
	"tanh":    math.Tanh,
	"sigmoid": func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	// log(1 + exp(x)), as gorgonia computes it (so that Grad's graph and
	// the op agree).
	"softplus": func(x float64) float64 {
		switch {
		case x < -708:
			return 0
		case x > 16:
			return x
		}
		return math.Log1p(math.Exp(x))
	},
}

// alongAxis sums t over axis (the mean, with mean), as axisShape says.
func alongAxis(t *tensor.Dense, axis int, mean bool) *tensor.Dense {
	shape := t.Shape()
	outer, inner := product(shape[:axis]), product(shape[axis+1:])
	n := shape[axis]
	out := make([]float64, outer*inner)
	data := values(t)
	for o := range outer {
		for k := range n {
			for i := range inner {
				out[o*inner+i] += data[(o*n+k)*inner+i]
			}
		}
	}
	if mean {
		for i := range out {
			out[i] /= float64(n)
		}
	}
	res := append(shape[:axis:axis].Clone(), shape[axis+1:]...)
	if len(res) == 0 {
		res = tensor.Shape{1}
	}
	return withValues(t, res, out)
}

func product(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}
