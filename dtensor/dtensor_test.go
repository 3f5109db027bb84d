package dtensor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
	"github.com/monarch-go/monarch/internal/testenv"
	"gorgonia.org/tensor"
)

// Linear multiplies its input by 2·I, so results are easy to check.
type Linear struct{ w *tensor.Dense }

func (l *Linear) Init(ctx *actorrt.Context, n int) error {
	data := make([]float64, n*n)
	for i := 0; i < n; i++ {
		data[i*n+i] = 2
	}
	l.w = tensor.New(tensor.WithShape(n, n), tensor.WithBacking(data))
	return nil
}

func (l *Linear) Forward(ctx *actorrt.Context, x dtensor.Shard) (dtensor.Shard, error) {
	out, err := tensor.MatMul(x.T, l.w)
	if err != nil {
		return dtensor.Shard{}, err
	}
	return dtensor.NewShard(out.(*tensor.Dense)), nil
}

// Broken fails on every shard.
func (l *Linear) Broken(ctx *actorrt.Context, x dtensor.Shard) (dtensor.Shard, error) {
	return dtensor.Shard{}, errors.New("broken layer")
}

// Sum reports the sum of the shard it was given: its own proc's.
func (l *Linear) Sum(ctx *actorrt.Context, x dtensor.Shard) (float64, error) {
	s := 0.0
	for _, v := range x.T.Float64s() {
		s += v
	}
	return s, nil
}

var (
	forward = dtensor.Endpoint("test.forward", (*Linear).Forward, func(s tensor.Shape) tensor.Shape { return s })
	broken  = dtensor.Endpoint("test.broken", (*Linear).Broken, func(s tensor.Shape) tensor.Shape { return s })
)

// clientCtx is the ctx Run gives the tests: it carries the client's
// runtime, which ThisHost resolves from it.
var clientCtx context.Context

func TestMain(m *testing.M) {
	env := testenv.Setup() // first: procs inherit it
	if err := actorrt.Register[Linear](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := 0
	status := actorrt.Run(func(ctx context.Context) error { clientCtx = ctx; code = m.Run(); return nil })
	if status != 0 {
		code = status
	}
	os.Exit(env.Finish(code))
}

func setup(t *testing.T) (context.Context, *actorrt.ProcMesh, *dtensor.Mesh) {
	ctx, cancel := context.WithTimeout(clientCtx, 60*time.Second)
	t.Cleanup(cancel)
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { procs.Stop(ctx) })
	return ctx, procs, dtensor.Activate(procs)
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// shards fetches every shard of x, by rank.
func shards(t *testing.T, ctx context.Context, x *dtensor.Tensor) []*tensor.Dense {
	t.Helper()
	var out []*tensor.Dense
	for _, p := range x.Mesh().Extent().Points() {
		out = append(out, must[*tensor.Dense](t)(dtensor.FetchShard(ctx, x, p)))
	}
	return out
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func TestOps(t *testing.T) {
	ctx, _, m := setup(t)
	x := must[*dtensor.Tensor](t)(m.Rand(3, 4))
	xs := shards(t, ctx, x)
	if near(xs[0].Float64s(), xs[1].Float64s()) {
		t.Fatal("two procs hold the same random shard")
	}
	xt := must[*dtensor.Tensor](t)(x.T())
	d := must[*dtensor.Tensor](t)(x.MatMul(xt))
	if !d.Shape().Eq(tensor.Shape{3, 3}) {
		t.Fatalf("matmul shape %v", d.Shape())
	}
	r := must[*dtensor.Tensor](t)(must[*dtensor.Tensor](t)(x.Scale(-1)).Add(x))
	row := must[*dtensor.Tensor](t)(d.Row(1))
	relu := must[*dtensor.Tensor](t)(must[*dtensor.Tensor](t)(x.Scale(-1)).Relu())
	for i, got := range shards(t, ctx, d) {
		xi := xs[i].Clone().(*tensor.Dense)
		xit := xi.Clone().(*tensor.Dense)
		xit.T()
		want, _ := tensor.MatMul(xi, xit)
		if !near(got.Float64s(), want.(*tensor.Dense).Float64s()) {
			t.Fatalf("proc %d: x·xᵀ = %v, want %v", i, got, want)
		}
		gotRow := must[*tensor.Dense](t)(dtensor.FetchShard(ctx, row, x.Mesh().Extent().Points()[i]))
		if !near(gotRow.Float64s(), want.(*tensor.Dense).Float64s()[3:6]) {
			t.Fatalf("proc %d: row 1 = %v", i, gotRow)
		}
	}
	for _, z := range shards(t, ctx, r) {
		if !near(z.Float64s(), make([]float64, 12)) {
			t.Fatalf("-x + x = %v", z)
		}
	}
	for _, z := range shards(t, ctx, relu) {
		if !near(z.Float64s(), make([]float64, 12)) { // relu(-x) with x in [0, 1)
			t.Fatalf("relu(-x) = %v", z)
		}
	}
	if _, err := x.MatMul(x); !errors.Is(err, dtensor.ErrShape) {
		t.Fatalf("(3x4)(3x4): %v", err)
	}
}

func TestReduce(t *testing.T) {
	ctx, _, m := setup(t)
	x := must[*dtensor.Tensor](t)(m.Rand(2, 2))
	xs := shards(t, ctx, x)
	sum := must[*dtensor.Tensor](t)(dtensor.Reduce(ctx, x, []string{"gpus"}, dtensor.Sum))
	max := must[*dtensor.Tensor](t)(dtensor.Reduce(ctx, x, nil, dtensor.Max))
	for i, got := range shards(t, ctx, sum) {
		host := i / 2
		want := make([]float64, 4)
		for j := range want {
			want[j] = xs[host*2].Float64s()[j] + xs[host*2+1].Float64s()[j]
		}
		if !near(got.Float64s(), want) {
			t.Fatalf("proc %d: sum over gpus %v, want %v", i, got.Float64s(), want)
		}
	}
	for _, got := range shards(t, ctx, max) {
		for j := 0; j < 4; j++ {
			w := math.Max(math.Max(xs[0].Float64s()[j], xs[1].Float64s()[j]), math.Max(xs[2].Float64s()[j], xs[3].Float64s()[j]))
			if math.Abs(got.Float64s()[j]-w) > 1e-9 {
				t.Fatalf("max = %v", got.Float64s())
			}
		}
	}
	if _, err := dtensor.Reduce(ctx, x, []string{"nodes"}, dtensor.Sum); !errors.Is(err, dtensor.ErrShape) {
		t.Fatalf("unknown dim: %v", err)
	}
}

// TestShardsToActors: an actor given t.Shard() gets its own proc's shard;
// RRef keeps an endpoint's results where they are, as a new tensor.
func TestShardsToActors(t *testing.T) {
	ctx, procs, m := setup(t)
	x := must[*dtensor.Tensor](t)(m.Rand(2, 3))
	xs := shards(t, ctx, x)
	lin := must[*actorrt.ActorMesh[Linear]](t)(actorrt.Init1((*Linear).Init).Spawn(ctx, procs, "linear", 3))
	sums := must[actorrt.ValueMesh[float64]](t)(actorrt.Method1((*Linear).Sum).Call(lin, x.Shard()).Get(ctx))
	for i, s := range sums.Values() {
		want := 0.0
		for _, v := range xs[i].Float64s() {
			want += v
		}
		if math.Abs(s-want) > 1e-9 {
			t.Fatalf("actor %d summed %v, want %v (its own shard)", i, s, want)
		}
	}
	y := must[*dtensor.Tensor](t)(forward.RRef(lin, x))
	o := must[*dtensor.Tensor](t)(y.Relu())
	for i, got := range shards(t, ctx, o) {
		want := make([]float64, 6)
		for j, v := range xs[i].Float64s() {
			want[j] = 2 * v
		}
		if !near(got.Float64s(), want) {
			t.Fatalf("relu(forward(x)) on %d = %v, want %v", i, got.Float64s(), want)
		}
	}
	// A failing endpoint poisons its result: using it fails at fetch.
	b := must[*dtensor.Tensor](t)(broken.RRef(lin, x))
	after := must[*dtensor.Tensor](t)(b.Relu())
	_, err := dtensor.FetchShard(ctx, after, procs.Extent().Points()[0])
	if err == nil || !strings.Contains(err.Error(), "broken layer") {
		t.Fatalf("fetch of a poisoned tensor: %v", err)
	}
}

// TestInspectShow: every shard, here, by rank; and as text under its
// point.
func TestInspectShow(t *testing.T) {
	ctx, procs, m := setup(t)
	x := must[*dtensor.Tensor](t)(m.Full(2.5, 2, 2))
	shards, err := dtensor.Inspect(ctx, x)
	if err != nil || len(shards) != procs.Extent().NumRanks() {
		t.Fatalf("Inspect: %d shards, %v", len(shards), err)
	}
	for i, s := range shards {
		if !s.Shape().Eq(tensor.Shape{2, 2}) || s.Float64s()[3] != 2.5 {
			t.Fatalf("shard %d: %v", i, s)
		}
	}
	text, err := dtensor.Show(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs.Extent().Points() {
		if !strings.Contains(text, p.String()+":\n") {
			t.Fatalf("Show does not name %v:\n%s", p, text)
		}
	}
	if strings.Count(text, "2.5") != 4*procs.Extent().NumRanks() {
		t.Errorf("Show:\n%s", text)
	}
}

// TestReduceScatterRefuses: a first axis the group's size does not divide,
// and a dimension the mesh does not have, fail at the call.
func TestReduceScatterRefuses(t *testing.T) {
	ctx, _, m := setup(t)
	x := must[*dtensor.Tensor](t)(m.Rand(3, 3))
	if _, err := dtensor.ReduceScatter(ctx, x, "gpus", dtensor.Sum); !errors.Is(err, dtensor.ErrShape) ||
		err.Error() != "dtensor: shapes do not fit: reducescatter of (3, 3) over 2 procs (the first axis must divide)" {
		t.Errorf("reduce-scatter of 3 rows over 2 procs: %v", err)
	}
	if _, err := dtensor.ReduceScatter(ctx, x, "nodes", dtensor.Sum); !errors.Is(err, dtensor.ErrShape) {
		t.Errorf("reduce-scatter over a missing dimension: %v", err)
	}
}

// TestToMesh: a tensor moved to another mesh of the same extent holds the
// same shards there, proc by proc, and works with that mesh's tensors; a
// mesh of another extent is refused.
func TestToMesh(t *testing.T) {
	ctx, procs, m := setup(t)
	other, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, procs.Extent().Dims())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Stop(ctx) })
	m2 := dtensor.Activate(other)
	x := must[*dtensor.Tensor](t)(m.Rand(3, 2))
	moved := must[*dtensor.Tensor](t)(dtensor.ToMesh(ctx, x, m2))
	xs, ms := shards(t, ctx, x), shards(t, ctx, moved)
	for i := range xs {
		if !near(xs[i].Float64s(), ms[i].Float64s()) {
			t.Fatalf("rank %d: moved %v, had %v", i, ms[i].Float64s(), xs[i].Float64s())
		}
	}
	sum := must[*dtensor.Tensor](t)(moved.Add(must[*dtensor.Tensor](t)(m2.Full(1, 3, 2))))
	if got := shards(t, ctx, sum); got[0].Float64s()[0] != xs[0].Float64s()[0]+1 {
		t.Fatalf("moved + 1 = %v", got[0].Float64s())
	}
	small, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { small.Stop(ctx) })
	if _, err := dtensor.ToMesh(ctx, x, dtensor.Activate(small)); !errors.Is(err, dtensor.ErrShape) {
		t.Errorf("to a mesh of another extent: %v", err)
	}
}

// TestFloat32: float32 shards through ops, a Reduce on the procs,
// ToMesh and back here, as float32 all the way; a float32 and a float64
// tensor in one op are refused at the call.
func TestFloat32(t *testing.T) {
	ctx, procs, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	x := tt(m.RandOf(dtensor.Float32, 2, 3))
	y := tt(tt(tt(x.Add(x)).Scale(0.5)).Exp())
	sum := tt(dtensor.Reduce(ctx, y, []string{"gpus"}, dtensor.Sum))
	if x.DType() != dtensor.Float32 || sum.DType() != dtensor.Float32 {
		t.Fatalf("element types %s, %s", x.DType(), sum.DType())
	}
	xs, sums := shards(t, ctx, x), shards(t, ctx, sum)
	for i, p := range procs.Extent().Points() {
		if sums[i].Dtype() != tensor.Float32 {
			t.Fatalf("a shard of %v here", sums[i].Dtype())
		}
		for k := range 6 {
			want := 0.0
			for j, q := range procs.Extent().Points() {
				h1, _ := p.Get("hosts")
				h2, _ := q.Get("hosts")
				if h1 == h2 {
					want += math.Exp(float64(xs[j].Float32s()[k]))
				}
			}
			if got := float64(sums[i].Float32s()[k]); math.Abs(got-want) > 1e-5*want {
				t.Fatalf("%v element %d: %v, want %v", p, k, got, want)
			}
		}
	}
	moved := tt(dtensor.ToMesh(ctx, x, m))
	if ms := shards(t, ctx, moved); ms[1].Dtype() != tensor.Float32 || ms[1].Float32s()[2] != xs[1].Float32s()[2] {
		t.Fatalf("ToMesh of float32: %v", ms[1])
	}
	x64 := tt(m.Rand(2, 3))
	if _, err := x.Add(x64); !errors.Is(err, dtensor.ErrShape) || !strings.Contains(err.Error(), "add of float32 and float64 tensors") {
		t.Errorf("float32 + float64: %v", err)
	}
	if _, err := m.RandOf("float16", 2); err == nil {
		t.Error("RandOf(float16) was taken")
	}
}
