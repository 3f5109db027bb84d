package dtensor_test

import (
	"context"
	"errors"
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
// nothing and return nil, and Err names it once; Drop frees what the step
// made but what it is told to keep.
func TestStep(t *testing.T) {
	ctx, procs, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	p0 := procs.Extent().Points()[0]
	x, w, b := tt(m.Rand(4, 3)), tt(m.Rand(3, 2)), tt(m.Rand(2))

	var s dtensor.Step
	h := s.Relu(s.Add(s.MatMul(x, w), b))
	loss := s.Mean(s.Sum(s.Mul(h, h), 1), 0)
	grads := s.Grad(ctx, loss, w, b)
	got := s.Fetch(ctx, loss, p0)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	h2 := tt(tt(tt(x.MatMul(w)).Add(b)).Relu())
	want := tt(tt(tt(h2.Mul(h2)).Sum(1)).Mean(0))
	if w := must[[]float64](t)(fetch64(ctx, want, p0)); !near(got.Float64s(), w) {
		t.Fatalf("the step's loss %v, the calls' %v", got.Float64s(), w)
	}
	if len(grads) != 2 || !grads[1].Shape().Eq(b.Shape()) {
		t.Fatalf("gradients %v", grads)
	}

	// Drop frees the step's tensors, not the ones it keeps nor the inputs
	// it did not make.
	s.Drop(grads[0])
	for _, gone := range []*dtensor.Tensor{h, loss, grads[1]} {
		if _, err := dtensor.FetchShard(ctx, gone, p0); err == nil || !strings.Contains(err.Error(), "no tensor") {
			t.Fatalf("%v after Drop: %v", gone, err)
		}
	}
	for _, kept := range []*dtensor.Tensor{grads[0], x, w, b} {
		if _, err := dtensor.FetchShard(ctx, kept, p0); err != nil {
			t.Fatalf("%v after Drop: %v", kept, err)
		}
	}

	// The first error is kept; nothing after it runs.
	var f dtensor.Step
	bad := f.MatMul(x, x) // (4, 3)(4, 3)
	after := f.Relu(f.Add(bad, b))
	if bad != nil || after != nil || f.Grad(ctx, after, w) != nil || f.Fetch(ctx, after, p0) != nil || f.ReduceAll(ctx, []*dtensor.Tensor{x}, dtensor.Mean) != nil {
		t.Fatal("calls after a failure returned tensors")
	}
	if f.Take(after.Relu()) != nil { // a (T, error) call on the nil it left
		t.Fatal("Take after a failure returned a tensor")
	}
	if d, err := f.FetchLater(after, p0).Get(ctx); d != nil || !errors.Is(err, dtensor.ErrShape) {
		t.Fatalf("FetchLater after a failure: %v, %v; want the step's error", d, err)
	}
	f.Fail(errors.New("later"))
	if err := f.Err(); !errors.Is(err, dtensor.ErrShape) || err.Error() != "dtensor: shapes do not fit: matmul of (4, 3) and (4, 3)" {
		t.Fatalf("Err: %v", err)
	}

	// An op that fails on the procs (an endpoint's error) is the step's
	// error at its Fetch.
	lin := must[*actorrt.ActorMesh[Linear]](t)(actorrt.Init1((*Linear).Init).Spawn(ctx, procs, "linear", 3))
	var e dtensor.Step
	y := e.Relu(e.Take(broken.RRef(lin, x)))
	e.Fetch(ctx, y, p0)
	if err := e.Err(); err == nil || !strings.Contains(err.Error(), "broken layer") {
		t.Fatalf("Err after a failing endpoint: %v", err)
	}
}
