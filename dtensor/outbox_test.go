package dtensor_test

import (
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
