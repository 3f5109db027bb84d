package dtensor_test

import (
	"errors"
	"math"
	"testing"

	"github.com/monarch-go/monarch/dtensor"
	"gorgonia.org/tensor"
)

// bcast is a op b here, NumPy-style, for 2-d shapes a and b (vectors are
// rows): the reference the procs' results are checked against.
func bcast(a, b []float64, as, bs, out tensor.Shape, f func(x, y float64) float64) []float64 {
	two := func(s tensor.Shape) (int, int) {
		if len(s) == 1 {
			return 1, s[0]
		}
		return s[0], s[1]
	}
	ar, ac := two(as)
	br, bc := two(bs)
	or, oc := two(out)
	res := make([]float64, 0, or*oc)
	for i := range or {
		for j := range oc {
			res = append(res, f(a[(i%ar)*ac+j%ac], b[(i%br)*bc+j%bc]))
		}
	}
	return res
}

// TestBroadcast: the elementwise ops of two tensors broadcast as NumPy
// does, on every proc, in float64 and float32; the gradient through a
// broadcast sums over the stretched axes; shapes that do not broadcast
// fail at the call, naming both.
func TestBroadcast(t *testing.T) {
	ctx, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	ops := map[string]struct {
		call func(a, b *dtensor.Tensor) (*dtensor.Tensor, error)
		f    func(x, y float64) float64
	}{
		"add": {(*dtensor.Tensor).Add, func(x, y float64) float64 { return x + y }},
		"sub": {(*dtensor.Tensor).Sub, func(x, y float64) float64 { return x - y }},
		"mul": {(*dtensor.Tensor).Mul, func(x, y float64) float64 { return x * y }},
		"div": {(*dtensor.Tensor).Div, func(x, y float64) float64 { return x / y }},
	}
	cases := []struct{ a, b, out tensor.Shape }{
		{tensor.Shape{4, 1}, tensor.Shape{1, 1}, tensor.Shape{4, 1}},
		{tensor.Shape{4, 3}, tensor.Shape{3}, tensor.Shape{4, 3}},
		{tensor.Shape{4, 1}, tensor.Shape{1, 3}, tensor.Shape{4, 3}},
		{tensor.Shape{3}, tensor.Shape{2, 3}, tensor.Shape{2, 3}},
		{tensor.Shape{1}, tensor.Shape{5}, tensor.Shape{5}},
		{tensor.Shape{2, 3}, tensor.Shape{2, 3}, tensor.Shape{2, 3}},
	}
	for _, c := range cases {
		a, b := tt(m.Rand(c.a...)), tt(tt(m.Rand(c.b...)).AddScalar(0.5))
		as, bs := shards(t, ctx, a), shards(t, ctx, b)
		for name, o := range ops {
			r := tt(o.call(a, b))
			if !r.Shape().Eq(c.out) {
				t.Fatalf("%s of %v and %v: shape %v, want %v", name, c.a, c.b, r.Shape(), c.out)
			}
			expect(t, ctx, r, func(p int) []float64 {
				return bcast(as[p].Float64s(), bs[p].Float64s(), c.a, c.b, c.out, o.f)
			})
		}
	}

	// float32: (4, 3) + (3).
	x32, v32 := tt(m.RandOf(dtensor.Float32, 4, 3)), tt(m.RandOf(dtensor.Float32, 3))
	xs, vs := shards(t, ctx, x32), shards(t, ctx, v32)
	for p, s := range shards(t, ctx, tt(x32.Add(v32))) {
		for i, got := range s.Float32s() {
			if want := xs[p].Float32s()[i] + vs[p].Float32s()[i%3]; got != want {
				t.Fatalf("proc %d element %d: %v, want %v", p, i, got, want)
			}
		}
	}

	// The gradient of sum((x·w + b)²) by b of shape (1) and by c of
	// shape (3): 2·Σ over the stretched axes of (x·w + b + c).
	x, w := tt(m.Rand(4, 2)), tt(m.Rand(2, 1))
	b, c := tt(m.Full(0.5, 1)), tt(m.Full(0.25, 3))
	z := tt(tt(tt(x.MatMul(w)).Add(b)).Add(c)) // (4, 1) + (1) + (3): (4, 3)
	loss := tt(tt(tt(z.Mul(z)).Sum(0)).Sum(0))
	grads := must[[]*dtensor.Tensor](t)(dtensor.Grad(ctx, loss, b, c, w))
	zs := shards(t, ctx, z)
	gb, gc := shards(t, ctx, grads[0]), shards(t, ctx, grads[1])
	if !grads[0].Shape().Eq(tensor.Shape{1}) || !grads[1].Shape().Eq(tensor.Shape{3}) || !grads[2].Shape().Eq(tensor.Shape{2, 1}) {
		t.Fatalf("gradient shapes %v %v %v", grads[0].Shape(), grads[1].Shape(), grads[2].Shape())
	}
	for p := range zs {
		wantB, wantC := 0.0, make([]float64, 3)
		for i, v := range zs[p].Float64s() {
			wantB += 2 * v
			wantC[i%3] += 2 * v
		}
		if math.Abs(gb[p].Float64s()[0]-wantB) > 1e-9 || !near(gc[p].Float64s(), wantC) {
			t.Fatalf("proc %d: d/db %v, want %v; d/dc %v, want %v", p, gb[p].Float64s(), wantB, gc[p].Float64s(), wantC)
		}
	}

	// Shapes that do not broadcast.
	for _, bad := range []struct {
		a, b tensor.Shape
		want string
	}{
		{tensor.Shape{4, 3}, tensor.Shape{4}, "dtensor: shapes do not fit: add of (4, 3) and (4)"},
		{tensor.Shape{2, 3}, tensor.Shape{3, 2}, "dtensor: shapes do not fit: add of (2, 3) and (3, 2)"},
		{tensor.Shape{4, 2}, tensor.Shape{3, 2, 2}, "dtensor: shapes do not fit: add of (4, 2) and (3, 2, 2)"},
	} {
		out, err := tt(m.Rand(bad.a...)).Add(tt(m.Rand(bad.b...)))
		if !errors.Is(err, dtensor.ErrShape) || err.Error() != bad.want || out != nil {
			t.Errorf("%v + %v: %v, %v; want %q", bad.a, bad.b, out, err, bad.want)
		}
	}
}
