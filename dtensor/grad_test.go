package dtensor_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/dtensor"
	"gorgonia.org/tensor"
)

// lossOf is the mean squared error of X·w against y, a tensor of one
// element per proc.
func lossOf(t *testing.T, x, w, y *dtensor.Tensor) *dtensor.Tensor {
	tt := must[*dtensor.Tensor](t)
	r := tt(tt(x.MatMul(w)).Sub(y))
	return tt(tt(r.Mul(r)).Mean(0))
}

// localGrad is the gradient of that loss here: 2/n Xᵀ(Xw - y).
func localGrad(x, w, y []float64, n, d int) []float64 {
	g := make([]float64, d)
	for i := range n {
		r := -y[i]
		for j := range d {
			r += x[i*d+j] * w[j]
		}
		for j := range d {
			g[j] += 2 * x[i*d+j] * r / float64(n)
		}
	}
	return g
}

// TestGrad: on every proc, the gradient of its loss by its parameters
// equals the analytic one, and finite differences; data-parallel SGD
// (gradients averaged across procs by Reduce) ends where the same SGD
// on all the data in one process does.
func TestGrad(t *testing.T) {
	ctx, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	const n, d = 4, 3
	x, y, w := tt(m.Rand(n, d)), tt(m.Rand(n, 1)), tt(m.Full(0.1, d, 1))
	grads, err := dtensor.Grad(ctx, lossOf(t, x, w, y), w)
	if err != nil {
		t.Fatal(err)
	}
	xs, ys, gs := shards(t, ctx, x), shards(t, ctx, y), shards(t, ctx, grads[0])
	ws := []float64{0.1, 0.1, 0.1}
	for p := range gs {
		want := localGrad(xs[p].Float64s(), ws, ys[p].Float64s(), n, d)
		if !gs[p].Shape().Eq(tensor.Shape{d, 1}) || !near(gs[p].Float64s(), want) {
			t.Fatalf("proc %d: gradient %v, want %v", p, gs[p].Float64s(), want)
		}
		// Finite differences of the loss itself.
		for j := range d {
			lossAt := func(h float64) float64 {
				w2 := append([]float64(nil), ws...)
				w2[j] += h
				l := 0.0
				for i := range n {
					r := -ys[p].Float64s()[i]
					for k := range d {
						r += xs[p].Float64s()[i*d+k] * w2[k]
					}
					l += r * r / n
				}
				return l
			}
			fd := (lossAt(1e-6) - lossAt(-1e-6)) / 2e-6
			if math.Abs(fd-gs[p].Float64s()[j]) > 1e-6 {
				t.Fatalf("proc %d weight %d: gradient %v, finite differences %v", p, j, gs[p].Float64s()[j], fd)
			}
		}
	}

	// Data-parallel SGD against the same here.
	const lr, steps = 0.3, 5
	for range steps {
		g := must[[]*dtensor.Tensor](t)(dtensor.Grad(ctx, lossOf(t, x, w, y), w))[0]
		mean := tt(dtensor.Reduce(ctx, g, nil, dtensor.Mean))
		w = tt(w.Sub(tt(mean.Scale(lr)))).Detach()
	}
	for range steps {
		avg := make([]float64, d)
		for p := range xs {
			for j, v := range localGrad(xs[p].Float64s(), ws, ys[p].Float64s(), n, d) {
				avg[j] += v / float64(len(xs))
			}
		}
		for j := range ws {
			ws[j] -= lr * avg[j]
		}
	}
	for p, s := range shards(t, ctx, w) {
		if !near(s.Float64s(), ws) {
			t.Fatalf("proc %d after %d steps: %v, in one process %v", p, steps, s.Float64s(), ws)
		}
	}
}

// TestGradRefuses: a loss of more than one element, and a parameter the
// loss does not depend on.
func TestGradRefuses(t *testing.T) {
	ctx, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	x, w, y, other := tt(m.Rand(4, 3)), tt(m.Rand(3, 1)), tt(m.Rand(4, 1)), tt(m.Rand(3, 1))
	if _, err := dtensor.Grad(ctx, tt(x.MatMul(w)), w); !errors.Is(err, dtensor.ErrShape) {
		t.Errorf("a loss of shape (4, 1): %v", err)
	}
	if _, err := dtensor.Grad(ctx, lossOf(t, x, w, y), other); !errors.Is(err, dtensor.ErrNoGradient) {
		t.Errorf("a parameter the loss does not read: %v", err)
	}
}

// TestGradThroughRowAndSoftmax: d/dx of sum(softmax(x)[row 1] * c) agrees
// with finite differences on every proc.
func TestGradThroughRowAndSoftmax(t *testing.T) {
	ctx, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	x, c := tt(m.Rand(2, 3)), tt(m.Rand(3))
	loss := tt(tt(tt(tt(x.Softmax()).Row(1)).Mul(c)).Sum(0))
	g := shards(t, ctx, must[[]*dtensor.Tensor](t)(dtensor.Grad(ctx, loss, x))[0])
	xs, cs := shards(t, ctx, x), shards(t, ctx, c)
	lossAt := func(x, c []float64) float64 {
		row := x[3:6]
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(v)
		}
		l := 0.0
		for j, v := range row {
			l += math.Exp(v) / sum * c[j]
		}
		return l
	}
	for p := range g {
		for k := range 6 {
			hi, lo := append([]float64(nil), xs[p].Float64s()...), append([]float64(nil), xs[p].Float64s()...)
			hi[k] += 1e-6
			lo[k] -= 1e-6
			fd := (lossAt(hi, cs[p].Float64s()) - lossAt(lo, cs[p].Float64s())) / 2e-6
			if got := g[p].Float64s()[k]; math.Abs(got-fd) > 1e-6 {
				t.Fatalf("proc %d element %d: gradient %v, finite differences %v", p, k, got, fd)
			}
		}
	}
}

// TestGradFloat32: the gradient of a float32 loss is float32, of the
// parameter's shape, and agrees with the same gradient in float64 (the
// same data, widened) to float32's precision; through a broadcast, a
// scale and a shift too.
func TestGradFloat32(t *testing.T) {
	ctx, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	x32, w32, b32 := tt(m.RandOf(dtensor.Float32, 4, 3)), tt(m.RandOf(dtensor.Float32, 3, 2)), tt(m.RandOf(dtensor.Float32, 2))
	widen := func(x *dtensor.Tensor) *dtensor.Tensor {
		per := [][]float64{}
		for _, s := range shards(t, ctx, x) {
			w := make([]float64, s.Shape().TotalSize())
			for i, v := range s.Float32s() {
				w[i] = float64(v)
			}
			per = append(per, w)
		}
		return tt(m.FromShards(per, x.Shape()...))
	}
	x64, w64, b64 := widen(x32), widen(w32), widen(b32)
	lossOf := func(x, w, b *dtensor.Tensor) *dtensor.Tensor {
		z := tt(tt(tt(tt(x.MatMul(w)).Add(b)).Scale(0.5)).AddScalar(-0.25))
		return tt(tt(tt(tt(z.Sigmoid()).Mul(z)).Mean(0)).Sum(0))
	}
	g32 := must[[]*dtensor.Tensor](t)(dtensor.Grad(ctx, lossOf(x32, w32, b32), w32, b32))
	g64 := must[[]*dtensor.Tensor](t)(dtensor.Grad(ctx, lossOf(x64, w64, b64), w64, b64))
	for i := range g32 {
		if g32[i].DType() != dtensor.Float32 || !g32[i].Shape().Eq(g64[i].Shape()) {
			t.Fatalf("gradient %d: %s %v", i, g32[i].DType(), g32[i].Shape())
		}
		s32, s64 := shards(t, ctx, g32[i]), shards(t, ctx, g64[i])
		for p := range s32 {
			if s32[p].Dtype() != tensor.Float32 {
				t.Fatalf("a shard of %v", s32[p].Dtype())
			}
			for j, v := range s32[p].Float32s() {
				if want := s64[p].Float64s()[j]; math.Abs(float64(v)-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("gradient %d, proc %d, element %d: float32 %v, float64 %v", i, p, j, v, want)
				}
			}
		}
	}
}

// TestGradDefers: the ops that made a loss, not sent yet when Grad is
// called, go with its first grad op and run on the procs only when read.
// The loss (from the gradient's run) and a tensor of the forward pass read
// afterwards, after the parameter it read was replaced by an update,
// have the values the ops give; a deferred op whose input was dropped
// fails when read, as it would have at once.
func TestGradDefers(t *testing.T) {
	ctx, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	const n, d = 4, 3
	x, y, w := tt(m.Rand(n, d)), tt(m.Rand(n, 1)), tt(m.Full(0.1, d, 1))
	xs, ys := shards(t, ctx, x), shards(t, ctx, y) // sent: the outbox is empty
	pred := tt(x.MatMul(w))
	r := tt(pred.Sub(y))
	loss := tt(tt(r.Mul(r)).Mean(0))
	grads, err := dtensor.Grad(ctx, loss, w)
	if err != nil {
		t.Fatal(err)
	}
	opt := must[*dtensor.Optimizer](t)(dtensor.NewOptimizer(dtensor.SGD{LR: 0.5}, w))
	if err := opt.Update(grads); err != nil {
		t.Fatal(err)
	}
	ls, ps := shards(t, ctx, loss), shards(t, ctx, pred)
	for p := range ls {
		want, mse := make([]float64, n), 0.0
		for i := range n {
			for j := range d {
				want[i] += xs[p].Float64s()[i*d+j] * 0.1
			}
			e := want[i] - ys[p].Float64s()[i]
			mse += e * e / n
		}
		if !near(ps[p].Float64s(), want) || !near(ls[p].Float64s(), []float64{mse}) {
			t.Fatalf("proc %d: prediction %v, loss %v; want %v, %v", p, ps[p].Float64s(), ls[p].Float64s(), want, mse)
		}
	}

	gone := tt(m.Rand(n, d))
	if err := gone.Drop(); err != nil {
		t.Fatal(err)
	}
	z := tt(gone.MatMul(w))
	if _, err := dtensor.Grad(ctx, tt(tt(z.Mul(z)).Mean(0)), w); err != nil {
		t.Fatal(err)
	}
	if _, err := dtensor.FetchShard(ctx, z, m.Extent().Points()[0]); err == nil || !strings.Contains(err.Error(), "no tensor") {
		t.Fatalf("a deferred op of a dropped tensor: %v, want no tensor", err)
	}
}

// TestGradDefersPastDrop: a forward op whose input is dropped after it
// is made, before Grad, is not deferred: it has run by the time the
// drop does, and its result is there to read, as it is without Grad.
func TestGradDefersPastDrop(t *testing.T) {
	ctx, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	const n, d = 4, 3
	x, w := tt(m.Rand(n, d)), tt(m.Full(0.1, d, 1))
	xs := shards(t, ctx, x) // sent: the outbox is empty
	a := tt(x.MatMul(w))
	b := tt(a.Exp())
	if err := a.Drop(); err != nil {
		t.Fatal(err)
	}
	if _, err := dtensor.Grad(ctx, tt(tt(b.Sum(0)).Mean(0)), w); err != nil {
		t.Fatal(err)
	}
	for p, got := range shards(t, ctx, b) {
		want := make([]float64, n)
		for i := range n {
			s := 0.0
			for j := range d {
				s += xs[p].Float64s()[i*d+j] * 0.1
			}
			want[i] = math.Exp(s)
		}
		if !near(got.Float64s(), want) {
			t.Fatalf("proc %d: exp(x·w) %v, want %v", p, got.Float64s(), want)
		}
	}
}
