package dtensor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
)

// fetch64 is the float64s of x's shard at p.
func fetch64(ctx context.Context, x *dtensor.Tensor, p actorrt.Point) ([]float64, error) {
	d, err := dtensor.FetchShard(ctx, x, p)
	if err != nil {
		return nil, err
	}
	return d.Float64s(), nil
}

// TestStep: a run of ops written without a check per op computes what
// the (T, error) calls compute; the first error is kept, later calls do
// nothing, and Err and Fetch name it; DropAllBut frees what the step made
// but what it is told to keep.
func TestStep(t *testing.T) {
	ctx, procs, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	p0 := procs.Extent().Points()[0]
	x, w, b := tt(m.Rand(4, 3)), tt(m.Rand(3, 2)), tt(m.Rand(2))

	var s dtensor.Step
	h := s.Relu(s.Add(s.MatMul(x, w), b))
	loss := s.Mean(s.Sum(s.Mul(h, h), 1), 0)
	grads := s.Grad(ctx, loss, w, b)
	got, err := s.Fetch(ctx, loss, p0)
	if err != nil || s.Err() != nil {
		t.Fatal(err, s.Err())
	}
	h2 := tt(tt(tt(x.MatMul(w)).Add(b)).Relu())
	want := tt(tt(tt(h2.Mul(h2)).Sum(1)).Mean(0))
	if w := must[[]float64](t)(fetch64(ctx, want, p0)); !near(got.Float64s(), w) {
		t.Fatalf("the step's loss %v, the calls' %v", got.Float64s(), w)
	}
	if len(grads) != 2 || !grads[1].Shape().Eq(b.Shape()) {
		t.Fatalf("gradients %v", grads)
	}

	// DropAllBut frees the step's tensors, not the ones it keeps nor the inputs
	// it did not make.
	s.DropAllBut(grads[0])
	for _, gone := range []*dtensor.Tensor{h, loss, grads[1]} {
		if _, err := dtensor.FetchShard(ctx, gone, p0); err == nil || !strings.Contains(err.Error(), "no tensor") {
			t.Fatalf("%v after DropAllBut: %v", gone, err)
		}
	}
	for _, kept := range []*dtensor.Tensor{grads[0], x, w, b} {
		if _, err := dtensor.FetchShard(ctx, kept, p0); err != nil {
			t.Fatalf("%v after DropAllBut: %v", kept, err)
		}
	}

	// The first error is kept; nothing after it runs.
	var f dtensor.Step
	bad := f.MatMul(x, x) // (4, 3)(4, 3)
	after := f.Relu(f.Add(bad, b))
	first := "dtensor: shapes do not fit: matmul of (4, 3) and (4, 3)"
	if d, err := f.Fetch(ctx, after, p0); d != nil || err == nil || err.Error() != first {
		t.Fatalf("Fetch after a failure: %v, %v; want the step's error", d, err)
	}
	if d, err := f.FetchLater(after, p0).Get(ctx); d != nil || !errors.Is(err, dtensor.ErrShape) {
		t.Fatalf("FetchLater after a failure: %v, %v; want the step's error", d, err)
	}
	if _, err := f.Take(after.Relu()).Relu(); err == nil || err.Error() != first { // a (T, error) call on what it left
		t.Fatalf("Take after a failure: %v; want the step's error", err)
	}
	f.Fail(errors.New("later"))
	var n dtensor.Step // a (T, error) call of the caller's that made nothing
	n.Take(nil, nil)
	n.DropAllBut()
	if err := n.Err(); err == nil || !strings.Contains(err.Error(), "nil tensor") {
		t.Fatalf("Take(nil, nil): %v", err)
	}
	if err := f.Err(); !errors.Is(err, dtensor.ErrShape) || err.Error() != first {
		t.Fatalf("Err: %v", err)
	}

	// An op that fails on the procs (an endpoint's error) is the step's
	// error at its Fetch.
	lin := must[*actorrt.ActorMesh[Linear]](t)(actorrt.Init1((*Linear).Init).Spawn(ctx, procs, "linear", 3))
	var e dtensor.Step
	y := e.Relu(e.Take(broken.RRef(lin, x)))
	if _, err := e.Fetch(ctx, y, p0); err == nil || !strings.Contains(err.Error(), "broken layer") || e.Err() != err {
		t.Fatalf("Fetch after a failing endpoint: %v; Err %v", err, e.Err())
	}
}

// TestFailedStepResults: once a step has failed, what its calls return
// is as long as the caller asked for, and every use of it returns the
// step's error, never a panic: the DDP example's step, written without a
// check before it slices the reduced gradients, panicked with "slice
// bounds out of range [:2]" at avg[:2] when Grad and ReduceAll returned
// nil. The parameters are left as they were.
func TestFailedStepResults(t *testing.T) {
	ctx, procs, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	p0 := procs.Extent().Points()[0]
	x, w, b := tt(m.Rand(4, 3)), tt(m.Rand(3, 1)), tt(m.Rand(1))
	before := must[[]float64](t)(fetch64(ctx, w, p0))
	opt := must[*dtensor.Optimizer](t)(dtensor.NewOptimizer(dtensor.DefaultAdam(0.1), w, b))
	lin := must[*actorrt.ActorMesh[Linear]](t)(actorrt.Init1((*Linear).Init).Spawn(ctx, procs, "linear", 3))

	var s dtensor.Step
	loss := s.Mean(s.Mean(s.MatMul(x, x), 0), 0) // (4, 3)(4, 3): the step fails here
	grads := s.Grad(ctx, loss, w, b)
	avg := s.ReduceAll(ctx, append(grads, loss), dtensor.Mean)
	s.Update(opt, avg[:2])
	l := s.FetchLater(avg[2], p0)
	s.DropAllBut(w, b)
	if len(grads) != 2 || len(avg) != 3 {
		t.Fatalf("a failed step's Grad gave %d gradients, ReduceAll %d results; want 2 and 3", len(grads), len(avg))
	}
	stepErr := s.Err()
	if !errors.Is(stepErr, dtensor.ErrShape) {
		t.Fatalf("Err: %v", stepErr)
	}
	if _, err := l.Get(ctx); err != stepErr {
		t.Fatalf("the loss's Get: %v; want the step's error", err)
	}

	// Every use of what the failed step returned is its error; of a nil
	// tensor, an error that says so.
	for _, g := range []*dtensor.Tensor{avg[0], nil} {
		want := stepErr.Error()
		if g == nil {
			want = "nil"
		}
		for name, use := range tensorUses(ctx, m, lin, g) {
			if err := use(); err == nil || !strings.Contains(err.Error(), want) || (g != nil && err != stepErr && name != "Shard") {
				t.Errorf("%s of %v: %v; want %q", name, g, err, want)
			}
		}
	}
	if err := opt.Update(avg[:2]); err != stepErr {
		t.Errorf("Update with a failed step's gradients: %v; want the step's error", err)
	}
	if _, err := avg[1].Detach().T(); err != stepErr {
		t.Errorf("T of a failed step's tensor detached: %v; want the step's error", err)
	}
	if got := fmt.Sprint(avg[0]); !strings.Contains(got, stepErr.Error()) {
		t.Errorf("a failed step's tensor prints as %q", got)
	}
	if after := must[[]float64](t)(fetch64(ctx, w, p0)); !near(after, before) {
		t.Fatalf("a failed step changed its parameter: %v, before %v", after, before)
	}
}

// tensorUses are the calls that take a tensor, each with g where the
// tensor goes; another input, where one is needed, is a usable tensor.
// Shard's call names its argument, around the tensor's error.
func tensorUses(ctx context.Context, m *dtensor.Mesh, lin *actorrt.ActorMesh[Linear], g *dtensor.Tensor) map[string]func() error {
	x, _ := m.Rand(4, 3)
	p0 := lin.Extent().Points()[0]
	return map[string]func() error{
		"Relu":          func() error { _, err := g.Relu(); return err },
		"Add":           func() error { _, err := x.Add(g); return err },
		"Drop":          g.Drop,
		"FetchShard":    func() error { _, err := dtensor.FetchShard(ctx, g, p0); return err },
		"Inspect":       func() error { _, err := dtensor.Inspect(ctx, g); return err },
		"Show":          func() error { _, err := dtensor.Show(ctx, g); return err },
		"Reduce":        func() error { _, err := dtensor.Reduce(ctx, g, nil, dtensor.Sum); return err },
		"ReduceScatter": func() error { _, err := dtensor.ReduceScatter(ctx, g, "gpus", dtensor.Sum); return err },
		"ReduceEach":    func() error { _, err := dtensor.ReduceEach(ctx, []*dtensor.Tensor{x, g}, nil, dtensor.Sum); return err },
		"Grad of it":    func() error { _, err := dtensor.Grad(ctx, g, x); return err },
		"Grad by it":    func() error { l, _ := x.Sum(0); l, _ = l.Sum(0); _, err := dtensor.Grad(ctx, l, g); return err },
		"ToMesh":        func() error { _, err := dtensor.ToMesh(ctx, g, m); return err },
		"RRef":          func() error { _, err := forward.RRef(lin, g); return err },
		"NewOptimizer":  func() error { _, err := dtensor.NewOptimizer(dtensor.DefaultAdam(0.1), g); return err },
		"Step":          func() error { var s dtensor.Step; s.Relu(g); return s.Err() },
		"Shard":         func() error { _, err := actorrt.Method1((*Linear).Sum).Call(lin, g.Shard()).Get(ctx); return err },
	}
}
