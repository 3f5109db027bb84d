package dtensor_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
	"gorgonia.org/tensor"
)

// expect fetches every shard of out, checks that it has the shape the
// client gave out (from the op's shape rule), and, if want is not nil,
// that it holds the values want gives for its proc. It returns the shards.
func expect(t *testing.T, ctx context.Context, out *dtensor.Tensor, want func(proc int) []float64) []*tensor.Dense {
	t.Helper()
	got := shards(t, ctx, out)
	for i, s := range got {
		if !s.Shape().Eq(out.Shape()) {
			t.Fatalf("proc %d: a shard of shape %v; the client says %v", i, s.Shape(), out.Shape())
		}
		if want != nil && !near(s.Float64s(), want(i)) {
			t.Fatalf("proc %d: %v, want %v", i, s.Float64s(), want(i))
		}
	}
	return got
}

// values is the data of a tensor computed here.
func values(t *testing.T) func(tensor.Tensor, error) []float64 {
	return func(r tensor.Tensor, err error) []float64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r.(*tensor.Dense).Materialize().(*tensor.Dense).Float64s()
	}
}

// TestEveryOp walks the op table: each op has a case here that runs it on
// the procs and checks every proc's result against the same computation
// done here on that proc's inputs, fetched.
func TestEveryOp(t *testing.T) {
	ctx, procs, m := setup(t)
	tt, vals := must[*dtensor.Tensor](t), values(t)
	x, y, w := tt(m.Rand(2, 3)), tt(m.Rand(2, 3)), tt(m.Rand(3, 4))
	xs, ys, ws := shards(t, ctx, x), shards(t, ctx, y), shards(t, ctx, w)
	cases := map[string]func(t *testing.T){
		"rand": func(t *testing.T) {
			r := expect(t, ctx, tt(m.Rand(2, 3)), nil)
			for i, s := range r {
				if slices.ContainsFunc(s.Float64s(), func(v float64) bool { return v < 0 || v >= 1 }) {
					t.Fatalf("proc %d: %v not in [0, 1)", i, s.Float64s())
				}
				if i > 0 && near(s.Float64s(), r[i-1].Float64s()) {
					t.Fatalf("procs %d and %d hold the same random shard", i-1, i)
				}
			}
		},
		"full": func(t *testing.T) {
			expect(t, ctx, tt(m.Full(1.5, 2, 3)), func(int) []float64 { return slices.Repeat([]float64{1.5}, 6) })
			expect(t, ctx, tt(m.Zeros(4)), func(int) []float64 { return make([]float64, 4) })
		},
		"data": func(t *testing.T) { // FromSlice, Scatter, FromShards: TestFromData
			expect(t, ctx, tt(m.FromSlice([]float64{1, 2, 3}, 3)), func(int) []float64 { return []float64{1, 2, 3} })
		},
		"optimize": func(t *testing.T) { // Optimizer.Update (TestOptimizers): SGD, p - lr·g
			p := tt(x.Scale(1))
			opt := must[*dtensor.Optimizer](t)(dtensor.NewOptimizer(dtensor.SGD{LR: 0.5}, p))
			if err := opt.Update([]*dtensor.Tensor{y}); err != nil {
				t.Fatal(err)
			}
			expect(t, ctx, p, func(i int) []float64 { return vals(tensor.Sub(xs[i], must[tensor.Tensor](t)(tensor.Mul(ys[i], 0.5)))) })
		},
		"optfree": func(t *testing.T) { // Optimizer.Free: the momentum starts again
			p := tt(x.Scale(1))
			opt := must[*dtensor.Optimizer](t)(dtensor.NewOptimizer(dtensor.SGD{LR: 1, Momentum: 0.5}, p))
			for _, free := range []bool{true, false} {
				if err := opt.Update([]*dtensor.Tensor{y}); err != nil {
					t.Fatal(err)
				}
				if free {
					if err := opt.Free(); err != nil {
						t.Fatal(err)
					}
				}
			}
			// x - y, then x - y - y (a fresh velocity): not x - y - 1.5y.
			expect(t, ctx, p, func(i int) []float64 { return vals(tensor.Sub(xs[i], must[tensor.Tensor](t)(tensor.Mul(ys[i], 2.0)))) })
		},
		"reducescatter": func(t *testing.T) {
			dim := procs.Extent().Names()[0]
			n, _ := procs.Extent().Size(dim)
			big := tt(m.Rand(2*n, 3))
			bs := shards(t, ctx, big)
			part := tt(dtensor.ReduceScatter(ctx, big, dim, dtensor.Sum))
			expect(t, ctx, part, func(i int) []float64 {
				p, _ := procs.Extent().Point(i)
				idx, _ := p.Get(dim)
				sum := make([]float64, 2*n*3)
				for j, q := range procs.Extent().Points() {
					if sameBut(p, q, dim) {
						for k, v := range bs[j].Float64s() {
							sum[k] += v
						}
					}
				}
				return sum[idx*6 : idx*6+6]
			})
		},
		"grad": func(t *testing.T) { // of sum(x·w): each row of x, summed
			w := tt(m.Rand(3, 1))
			g := must[[]*dtensor.Tensor](t)(dtensor.Grad(ctx, tt(tt(x.MatMul(w)).Sum(0)), w))[0]
			expect(t, ctx, g, func(i int) []float64 {
				d := xs[i].Float64s()
				return []float64{d[0] + d[3], d[1] + d[4], d[2] + d[5]}
			})
		},
		"gradfree": func(t *testing.T) { // more graphs than a mesh keeps: the oldest go, and come back
			w := tt(m.Rand(3, 1))
			for _, k := range []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 1, 2} {
				g := must[[]*dtensor.Tensor](t)(dtensor.Grad(ctx, tt(tt(tt(x.Scale(k)).MatMul(w)).Sum(0)), w))[0]
				expect(t, ctx, g, func(i int) []float64 {
					d := xs[i].Float64s()
					return []float64{k * (d[0] + d[3]), k * (d[1] + d[4]), k * (d[2] + d[5])}
				})
			}
		},
		"import": func(t *testing.T) { // ToMesh, onto the same procs here
			moved, err := dtensor.ToMesh(ctx, x, dtensor.Activate(procs))
			if err != nil {
				t.Fatal(err)
			}
			expect(t, ctx, moved, func(i int) []float64 { return xs[i].Float64s() })
		},
		"allreduce": func(t *testing.T) { // Reduce, as collectives among the procs
			mean := tt(dtensor.Reduce(ctx, x, nil, dtensor.Mean))
			expect(t, ctx, mean, func(int) []float64 {
				out := make([]float64, 6)
				for _, s := range xs {
					for j, v := range s.Float64s() {
						out[j] += v / float64(len(xs))
					}
				}
				return out
			})
		},
		"pack": func(t *testing.T) { // and unpack: ReduceEach, one collective for several tensors
			rs, err := dtensor.ReduceEach(ctx, []*dtensor.Tensor{x, y}, nil, dtensor.Sum)
			if err != nil {
				t.Fatal(err)
			}
			for k, in := range [][]*tensor.Dense{xs, ys} {
				expect(t, ctx, rs[k], func(int) []float64 {
					out := make([]float64, len(in[0].Float64s()))
					for _, s := range in {
						for j, v := range s.Float64s() {
							out[j] += v
						}
					}
					return out
				})
			}
		},
		"unpack": func(t *testing.T) { // each tensor back in its own shape, from its place in the vector
			xt := tt(x.T())
			rs, err := dtensor.ReduceEach(ctx, []*dtensor.Tensor{y, xt}, nil, dtensor.Max)
			if err != nil {
				t.Fatal(err)
			}
			if !rs[1].Shape().Eq(xt.Shape()) {
				t.Fatalf("unpacked shape %v, want %v", rs[1].Shape(), xt.Shape())
			}
			want := tt(dtensor.Reduce(ctx, xt, nil, dtensor.Max))
			ws := shards(t, ctx, want)
			expect(t, ctx, rs[1], func(i int) []float64 { return ws[i].Float64s() })
		},
		"matmul": func(t *testing.T) {
			expect(t, ctx, tt(x.MatMul(w)), func(i int) []float64 { return vals(tensor.MatMul(xs[i], ws[i])) })
		},
		"add": func(t *testing.T) {
			expect(t, ctx, tt(x.Add(y)), func(i int) []float64 { return vals(tensor.Add(xs[i], ys[i])) })
		},
		"mul": func(t *testing.T) {
			expect(t, ctx, tt(x.Mul(y)), func(i int) []float64 { return vals(tensor.Mul(xs[i], ys[i])) })
		},
		"scale": func(t *testing.T) {
			expect(t, ctx, tt(x.Scale(-2)), func(i int) []float64 { return vals(tensor.Mul(xs[i], -2.0)) })
		},
		"transpose": func(t *testing.T) {
			expect(t, ctx, tt(x.T()), func(i int) []float64 {
				out := make([]float64, 6)
				for r := range 2 {
					for c := range 3 {
						out[c*2+r] = xs[i].Float64s()[r*3+c]
					}
				}
				return out
			})
		},
		"relu": func(t *testing.T) {
			centred := tt(x.Add(tt(m.Full(-0.5, 2, 3))))
			expect(t, ctx, tt(centred.Relu()), func(i int) []float64 {
				out := make([]float64, 6)
				for j, v := range xs[i].Float64s() {
					out[j] = math.Max(v-0.5, 0)
				}
				return out
			})
		},
		"sub": func(t *testing.T) {
			expect(t, ctx, tt(x.Sub(y)), func(i int) []float64 { return vals(tensor.Sub(xs[i], ys[i])) })
		},
		"div": func(t *testing.T) {
			expect(t, ctx, tt(x.Div(y)), func(i int) []float64 { return vals(tensor.Div(xs[i], ys[i])) })
		},
		"shift": func(t *testing.T) {
			expect(t, ctx, tt(x.AddScalar(3)), func(i int) []float64 { return vals(tensor.Add(xs[i], 3.0)) })
		},
		"unary": func(t *testing.T) {
			for _, f := range map[string]struct {
				call func() (*dtensor.Tensor, error)
				fn   func(float64) float64
			}{
				"exp": {x.Exp, math.Exp}, "log": {x.Log, math.Log}, "tanh": {x.Tanh, math.Tanh},
				"sigmoid":  {x.Sigmoid, func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
				"softplus": {x.Softplus, func(v float64) float64 { return math.Log1p(math.Exp(v)) }},
			} {
				expect(t, ctx, tt(f.call()), func(i int) []float64 {
					out := slices.Clone(xs[i].Float64s())
					for j, v := range out {
						out[j] = f.fn(v)
					}
					return out
				})
			}
		},
		"softmax": func(t *testing.T) {
			expect(t, ctx, tt(x.Softmax()), func(i int) []float64 {
				out := slices.Clone(xs[i].Float64s())
				for r := range 2 {
					row := out[3*r : 3*r+3]
					sum := 0.0
					for j, v := range row {
						row[j] = math.Exp(v)
						sum += row[j]
					}
					for j := range row {
						row[j] /= sum
					}
				}
				return out
			})
		},
		"sum": func(t *testing.T) {
			expect(t, ctx, tt(x.Sum(0)), func(i int) []float64 {
				d := xs[i].Float64s()
				return []float64{d[0] + d[3], d[1] + d[4], d[2] + d[5]}
			})
			expect(t, ctx, tt(x.Mean(1)), func(i int) []float64 {
				d := xs[i].Float64s()
				return []float64{(d[0] + d[1] + d[2]) / 3, (d[3] + d[4] + d[5]) / 3}
			})
		},
		"reshape": func(t *testing.T) {
			r := expect(t, ctx, tt(x.Reshape(3, 2)), func(i int) []float64 { return xs[i].Float64s() })
			if !r[0].Shape().Eq(tensor.Shape{3, 2}) {
				t.Fatalf("reshaped to %v", r[0].Shape())
			}
		},
		"row": func(t *testing.T) {
			expect(t, ctx, tt(x.Row(1)), func(i int) []float64 { return xs[i].Float64s()[3:6] })
		},
		"rref": func(t *testing.T) {
			lin := must[*actorrt.ActorMesh[Linear]](t)(actorrt.Init1((*Linear).Init).Spawn(ctx, procs, "linear", 3))
			expect(t, ctx, tt(forward.RRef(lin, x)), func(i int) []float64 { return vals(tensor.Mul(xs[i], 2.0)) })
		},
		"drop": func(t *testing.T) {
			z := tt(x.Mul(y))
			expect(t, ctx, z, func(i int) []float64 { return vals(tensor.Mul(xs[i], ys[i])) })
			if err := z.Drop(); err != nil {
				t.Fatal(err)
			}
			for _, p := range procs.Extent().Points() {
				if _, err := dtensor.FetchShard(ctx, z, p); err == nil || !strings.Contains(err.Error(), "no tensor") {
					t.Fatalf("fetch at %v of a dropped tensor: %v", p, err)
				}
			}
		},
	}
	names := dtensor.OpNames()
	for _, name := range names {
		run, ok := cases[name]
		if !ok {
			t.Errorf("op %q has no case in TestEveryOp", name)
			continue
		}
		t.Run(name, run)
	}
	for name := range cases {
		if !slices.Contains(names, name) {
			t.Errorf("TestEveryOp has a case for %q, which is not in the op table", name)
		}
	}
}

// TestShapeErrorsAtClient: an op whose shapes do not fit fails at the
// call, naming the op and the shapes.
func TestShapeErrorsAtClient(t *testing.T) {
	_, _, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	a, b, v := tt(m.Rand(2, 3)), tt(m.Rand(4, 5)), tt(m.Rand(3))
	at := tt(a.T())
	tests := []struct {
		name string
		call func() (*dtensor.Tensor, error)
		want string
	}{
		{"matmul", func() (*dtensor.Tensor, error) { return a.MatMul(b) }, "dtensor: shapes do not fit: matmul of (2, 3) and (4, 5)"},
		{"matmul of a vector", func() (*dtensor.Tensor, error) { return v.MatMul(at) }, "dtensor: shapes do not fit: matmul of (3) and (3, 2)"},
		{"add", func() (*dtensor.Tensor, error) { return a.Add(at) }, "dtensor: shapes do not fit: add of (2, 3) and (3, 2)"},
		{"mul", func() (*dtensor.Tensor, error) { return b.Mul(a) }, "dtensor: shapes do not fit: mul of (4, 5) and (2, 3)"},
		{"transpose", func() (*dtensor.Tensor, error) { return v.T() }, "dtensor: shapes do not fit: transpose of (3)"},
		{"row", func() (*dtensor.Tensor, error) { return a.Row(2) }, "dtensor: shapes do not fit: row 2 of (2, 3)"},
		{"row of a vector", func() (*dtensor.Tensor, error) { return v.Row(0) }, "dtensor: shapes do not fit: row 0 of (3)"},
		{"rand", func() (*dtensor.Tensor, error) { return m.Rand(0, 3) }, "dtensor: shapes do not fit: rand of shape (0, 3)"},
		{"full", func() (*dtensor.Tensor, error) { return m.Full(1, -2, -3) }, "dtensor: shapes do not fit: full of shape (-2, -3)"},
		{"zeros", func() (*dtensor.Tensor, error) { return m.Zeros() }, "dtensor: shapes do not fit: full of shape ()"},
		{"sub", func() (*dtensor.Tensor, error) { return a.Sub(b) }, "dtensor: shapes do not fit: sub of (2, 3) and (4, 5)"},
		{"sum", func() (*dtensor.Tensor, error) { return a.Sum(2) }, "dtensor: shapes do not fit: sum over axis 2 of (2, 3)"},
		{"reshape", func() (*dtensor.Tensor, error) { return a.Reshape(4, 2) }, "dtensor: shapes do not fit: reshape of (2, 3) to (4, 2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.call()
			if !errors.Is(err, dtensor.ErrShape) || err.Error() != tc.want || out != nil {
				t.Fatalf("got %v, %v; want the error %q", out, err, tc.want)
			}
		})
	}
}

// sameBut reports whether p and q differ at most along dim.
func sameBut(p, q actorrt.Point, dim string) bool {
	for _, name := range p.Extent().Names() {
		a, _ := p.Get(name)
		b, _ := q.Get(name)
		if name != dim && a != b {
			return false
		}
	}
	return true
}
