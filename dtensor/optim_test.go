package dtensor_test

import (
	"errors"
	"math"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
	"gorgonia.org/tensor"
)

// floats is a shard's elements as float64s.
func floats(d *tensor.Dense) []float64 {
	if d.Dtype() == tensor.Float32 {
		var out []float64
		for _, v := range d.Float32s() {
			out = append(out, float64(v))
		}
		return out
	}
	return d.Float64s()
}

// regression is a least-squares problem in one process: 8 rows of 3
// features, the gradient of mean((x·w + b - y)²) by w and b.
type regression struct{ x, y []float64 }

func (r regression) grad(w []float64, b float64) ([]float64, float64) {
	n := len(r.y)
	gw, gb := make([]float64, 3), 0.0
	for i := range n {
		res := b - r.y[i]
		for j := range 3 {
			res += r.x[3*i+j] * w[j]
		}
		for j := range 3 {
			gw[j] += 2 * r.x[3*i+j] * res / float64(n)
		}
		gb += 2 * res / float64(n)
	}
	return gw, gb
}

// reference runs steps of rule (SGD or Adam) here, as the optimizers'
// documentation writes them.
func reference(r regression, rule dtensor.Rule, steps int) ([]float64, float64) {
	p := []float64{0.1, -0.2, 0.3, 0.05} // w, then b
	a, b := make([]float64, 4), make([]float64, 4)
	for t := 1; t <= steps; t++ {
		gw, gb := r.grad(p[:3], p[3])
		g := append(gw, gb)
		for i := range p {
			switch rule := rule.(type) {
			case dtensor.SGD:
				a[i] = rule.Momentum*a[i] + g[i]
				p[i] -= rule.LR * a[i]
			case dtensor.Adam:
				a[i] = rule.Beta1*a[i] + (1-rule.Beta1)*g[i]
				b[i] = rule.Beta2*b[i] + (1-rule.Beta2)*g[i]*g[i]
				mh, vh := a[i]/(1-math.Pow(rule.Beta1, float64(t))), b[i]/(1-math.Pow(rule.Beta2, float64(t)))
				p[i] -= rule.LR * mh / (math.Sqrt(vh) + rule.Eps)
			}
		}
	}
	return p[:3], p[3]
}

// TestOptimizers: data-parallel training on the procs (rows scattered
// along gpus, gradients averaged by Reduce, the update on the procs) with
// SGD with momentum and with Adam, in float64 and float32, ends where the
// same optimizer on all the rows ends here.
func TestOptimizers(t *testing.T) {
	ctx, _, m := setup(t)
	r := regression{y: make([]float64, 8)}
	for i := range 24 {
		r.x = append(r.x, math.Sin(float64(i)))
	}
	for i := range r.y {
		r.y[i] = math.Cos(float64(i))
	}
	const steps = 6
	for _, tc := range []struct {
		name  string
		rule  dtensor.Rule
		dtype string
		tol   float64
	}{
		{"sgd", dtensor.SGD{LR: 0.1, Momentum: 0.9}, dtensor.Float64, 1e-12},
		{"sgd without momentum", dtensor.SGD{LR: 0.1}, dtensor.Float64, 1e-12},
		{"adam", dtensor.DefaultAdam(0.05), dtensor.Float64, 1e-12},
		{"adam float32", dtensor.DefaultAdam(0.05), dtensor.Float32, 1e-5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := func(v []float64) any {
				if tc.dtype == dtensor.Float64 {
					return v
				}
				f := make([]float32, len(v))
				for i, x := range v {
					f[i] = float32(x)
				}
				return f
			}
			var s dtensor.Step
			x, y := s.Scatter(m, "gpus", as(r.x), 8, 3), s.Scatter(m, "gpus", as(r.y), 8, 1)
			w, b := s.FromSlice(m, as([]float64{0.1, -0.2, 0.3}), 3, 1), s.FromSlice(m, as([]float64{0.05}), 1)
			opt := must[*dtensor.Optimizer](t)(dtensor.NewOptimizer(tc.rule, w, b))
			for range steps {
				res := s.Sub(s.Add(s.MatMul(x, w), b), y)
				loss := s.Mean(s.Mean(s.Mul(res, res), 0), 0)
				s.Update(opt, s.ReduceAll(ctx, s.Grad(ctx, loss, w, b), dtensor.Mean))
				s.DropAllBut(x, y, w, b)
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			ws, bs := reference(r, tc.rule, steps)
			want := append(ws, bs)
			ps := append(must[[]*tensor.Dense](t)(dtensor.Inspect(ctx, w)), must[[]*tensor.Dense](t)(dtensor.Inspect(ctx, b))...)
			n := len(ps) / 2
			for p := range n {
				got := append(floats(ps[p]), floats(ps[n+p])...)
				for i := range want {
					if math.Abs(got[i]-want[i]) > tc.tol {
						t.Fatalf("proc %d after %d steps: %v; here %v", p, steps, got, want)
					}
				}
			}
			if err := opt.Free(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOptimizerRefuses: parameters or gradients of another mesh, a
// gradient of another shape, too few gradients and hyperparameters out
// of range fail at the call.
func TestOptimizerRefuses(t *testing.T) {
	ctx, procs, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	other, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, procs.Extent().Dims())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Stop(ctx) })
	m2 := dtensor.Activate(other)
	w, b, elsewhere := tt(m.Rand(3, 1)), tt(m.Rand(1)), tt(m2.Rand(3, 1))
	if _, err := dtensor.NewOptimizer(dtensor.DefaultAdam(0.1), w, elsewhere); !errors.Is(err, dtensor.ErrMesh) {
		t.Errorf("parameters of two meshes: %v", err)
	}
	opt := must[*dtensor.Optimizer](t)(dtensor.NewOptimizer(dtensor.SGD{LR: 0.1}, w, b))
	for name, tc := range map[string]struct {
		grads []*dtensor.Tensor
		is    error
	}{
		"a gradient of another mesh":  {[]*dtensor.Tensor{elsewhere, b}, dtensor.ErrMesh},
		"a gradient of another shape": {[]*dtensor.Tensor{b, b}, dtensor.ErrShape},
		"a gradient of another type":  {[]*dtensor.Tensor{tt(m.RandOf(dtensor.Float32, 3, 1)), b}, dtensor.ErrShape},
	} {
		if err := opt.Update(tc.grads); !errors.Is(err, tc.is) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := opt.Update([]*dtensor.Tensor{w}); err == nil {
		t.Error("one gradient for two parameters was taken")
	}
	for _, rule := range []dtensor.Rule{dtensor.SGD{}, dtensor.SGD{LR: 1, Momentum: 1}, dtensor.Adam{LR: 1}, dtensor.DefaultAdam(-1)} {
		if _, err := dtensor.NewOptimizer(rule, w); err == nil {
			t.Errorf("%+v was taken", rule)
		}
	}
	if _, err := dtensor.NewOptimizer(dtensor.DefaultAdam(0.1)); err == nil {
		t.Error("an optimizer of nothing was taken")
	}
	// The refused updates changed nothing: w is still there.
	if _, err := dtensor.Inspect(ctx, w); err != nil {
		t.Fatal(err)
	}
}
