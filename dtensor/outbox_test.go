package dtensor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/monarch-go/monarch/dtensor"
)

// TestOutbox: ops kept in the outbox go within its delay with nothing
// waiting for them; a fetch sends them at once; a data op too large for
// a batch goes alone, after those kept before it, and the ops after it
// see it: each proc runs them in the order they were recorded.
func TestOutbox(t *testing.T) {
	ctx, _, m := setup(t)
	x := must[*dtensor.Tensor](t)(m.Full(1, 2, 2))
	y := must[*dtensor.Tensor](t)(x.AddScalar(1))
	if n := dtensor.Kept(m); n == 0 {
		t.Fatalf("nothing kept after two ops")
	}
	deadline := time.Now().Add(10 * time.Second)
	for dtensor.Kept(m) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d ops still kept after 10s", dtensor.Kept(m))
		}
		time.Sleep(time.Millisecond)
	}
	z := must[*dtensor.Tensor](t)(y.AddScalar(1))
	for _, s := range shards(t, ctx, z) {
		if got := s.Float64s(); !near(got, []float64{3, 3, 3, 3}) {
			t.Fatalf("shard %v; want 3s", got)
		}
	}
	// A large data op between small ones.
	big := make([]float64, 64<<10) // 512 KiB: more than a batch carries
	for i := range big {
		big[i] = float64(i)
	}
	a := must[*dtensor.Tensor](t)(x.AddScalar(10))
	b := must[*dtensor.Tensor](t)(m.FromSlice(big, len(big)))
	c := must[*dtensor.Tensor](t)(b.AddScalar(1))
	for _, s := range shards(t, ctx, c) {
		if got := s.Float64s(); got[0] != 1 || got[len(got)-1] != float64(len(big)) {
			t.Fatalf("shard of b+1: [%v ... %v]", got[0], got[len(got)-1])
		}
	}
	for _, s := range shards(t, ctx, a) {
		if got := s.Float64s(); !near(got, []float64{11, 11, 11, 11}) {
			t.Fatalf("shard %v; want 11s", got)
		}
	}
}

// TestReduceEach: several tensors reduced as one collective give what
// each Reduce gives, each in its own shape; tensors of two element types
// or two meshes are refused.
func TestReduceEach(t *testing.T) {
	ctx, procs, m := setup(t)
	a := must[*dtensor.Tensor](t)(m.Rand(3, 2))
	b := must[*dtensor.Tensor](t)(m.Rand(4))
	c := must[*dtensor.Tensor](t)(m.Rand(1, 1))
	got := must[[]*dtensor.Tensor](t)(dtensor.ReduceEach(ctx, []*dtensor.Tensor{a, b, c}, []string{"gpus"}, dtensor.Mean))
	for i, x := range []*dtensor.Tensor{a, b, c} {
		want := must[*dtensor.Tensor](t)(dtensor.Reduce(ctx, x, []string{"gpus"}, dtensor.Mean))
		if !got[i].Shape().Eq(x.Shape()) {
			t.Fatalf("tensor %d: shape %v, want %v", i, got[i].Shape(), x.Shape())
		}
		gs, ws := shards(t, ctx, got[i]), shards(t, ctx, want)
		for r := range gs {
			if !near(gs[r].Float64s(), ws[r].Float64s()) {
				t.Fatalf("tensor %d, proc %d: %v, want %v", i, r, gs[r].Float64s(), ws[r].Float64s())
			}
		}
	}
	f := must[*dtensor.Tensor](t)(m.RandOf(dtensor.Float32, 2))
	if _, err := dtensor.ReduceEach(ctx, []*dtensor.Tensor{a, f}, nil, dtensor.Sum); err == nil {
		t.Errorf("float64 and float32 reduced together")
	}
	other := dtensor.Activate(procs)
	o := must[*dtensor.Tensor](t)(other.Rand(2))
	if _, err := dtensor.ReduceEach(ctx, []*dtensor.Tensor{a, o}, nil, dtensor.Sum); !errors.Is(err, dtensor.ErrMesh) {
		t.Errorf("tensors of two meshes: %v, want ErrMesh", err)
	}
}

// TestFetchShardLater: a fetch sent without waiting sees the ops recorded
// before it and none after (a drop, here), in order on the proc; Get
// gives the shard. A nil tensor is an error at Get.
func TestFetchShardLater(t *testing.T) {
	ctx, _, m := setup(t)
	x := must[*dtensor.Tensor](t)(m.Full(1, 2, 2))
	y := must[*dtensor.Tensor](t)(x.AddScalar(1))
	f := dtensor.FetchShardLater(y, m.Extent().Points()[0])
	if err := y.Drop(); err != nil {
		t.Fatal(err)
	}
	d, err := f.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Float64s(); len(got) != 4 || got[0] != 2 || got[3] != 2 {
		t.Fatalf("fetched %v, want 2s", got)
	}
	if _, err := dtensor.FetchShardLater(nil, m.Extent().Points()[0]).Get(ctx); err == nil {
		t.Fatal("a fetch of a nil tensor: no error")
	}
}
