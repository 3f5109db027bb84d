package dtensor_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/dtensor"
	"gorgonia.org/tensor"
)

// TestFromData: the client's own data as tensors: one slice on every
// proc (FromSlice), split along a mesh dimension (Scatter, each part on
// every proc of its index there), one slice per proc (FromShards), in
// float64 and float32.
func TestFromData(t *testing.T) {
	ctx, procs, m := setup(t)
	tt := must[*dtensor.Tensor](t)
	data := make([]float64, 12)
	for i := range data {
		data[i] = float64(i)
	}

	same := tt(m.FromSlice(data, 3, 4))
	expect(t, ctx, same, func(int) []float64 { return data })

	// Along gpus (size 2): gpu g holds rows 2g and 2g+1, whatever its
	// host; along hosts, host h holds them.
	for _, dim := range []string{"gpus", "hosts"} {
		part := tt(m.Scatter(dim, data, 4, 3))
		if !part.Shape().Eq(tensor.Shape{2, 3}) {
			t.Fatalf("scatter along %s: shard shape %v", dim, part.Shape())
		}
		expect(t, ctx, part, func(r int) []float64 {
			p, _ := procs.Extent().Point(r)
			i, _ := p.Get(dim)
			return data[6*i : 6*i+6]
		})
	}

	per := make([][]float64, procs.Extent().NumRanks())
	for r := range per {
		per[r] = []float64{float64(r), float64(10 * r)}
	}
	own := tt(m.FromShards(per, 2))
	expect(t, ctx, own, func(r int) []float64 { return per[r] })

	f32 := []float32{1.5, 2.5, 3.5, 4.5}
	x := tt(m.Scatter("hosts", f32, 2, 2))
	if x.DType() != dtensor.Float32 {
		t.Fatalf("element type %s", x.DType())
	}
	for r, s := range shards(t, ctx, x) {
		p, _ := procs.Extent().Point(r)
		h, _ := p.Get("hosts")
		if !slices.Equal(s.Float32s(), f32[2*h:2*h+2]) {
			t.Fatalf("%v: %v", p, s.Float32s())
		}
	}
	// The client's slice is its own again once the call returns.
	data[0] = 99
	expect(t, ctx, same, func(int) []float64 { return append([]float64{0}, data[1:]...) })
}

// TestFromDataRefuses: data that does not match the shape or the mesh
// fails at the call, with the lengths and shapes named.
func TestFromDataRefuses(t *testing.T) {
	_, _, m := setup(t)
	six := make([]float64, 6)
	tests := []struct {
		name string
		call func() (*dtensor.Tensor, error)
		want string
		// shape: errors.Is(err, ErrShape)
		shape bool
	}{
		{"length", func() (*dtensor.Tensor, error) { return m.FromSlice(six, 2, 2) },
			"dtensor: shapes do not fit: fromslice of 6 elements to shape (2, 2)", true},
		{"bad shape", func() (*dtensor.Tensor, error) { return m.FromSlice(six, 6, 0) },
			"dtensor: shapes do not fit: fromslice of shape (6, 0)", true},
		{"no shape", func() (*dtensor.Tensor, error) { return m.FromSlice(six) },
			"dtensor: shapes do not fit: fromslice of shape ()", true},
		{"element type", func() (*dtensor.Tensor, error) { return m.FromSlice([]int{1, 2}, 2) },
			"dtensor: data of type []int (want []float64 or []float32)", false},
		{"scatter length", func() (*dtensor.Tensor, error) { return m.Scatter("gpus", six, 4, 2) },
			"dtensor: shapes do not fit: scatter of 6 elements to shape (4, 2)", true},
		{"scatter over a mesh it does not divide", func() (*dtensor.Tensor, error) { return m.Scatter("gpus", six, 3, 2) },
			`dtensor: shapes do not fit: scatter of (3, 2) along "gpus" of 2 procs (the first axis must divide)`, true},
		{"scatter along no dimension", func() (*dtensor.Tensor, error) { return m.Scatter("nodes", six, 6) },
			`dtensor: shapes do not fit: scatter along "nodes": no such dimension in`, true},
		{"too few shards", func() (*dtensor.Tensor, error) { return m.FromShards([][]float64{six, six}, 6) },
			"dtensor: shapes do not fit: 2 shards for a mesh of 4 procs", true},
		{"a shard's length", func() (*dtensor.Tensor, error) {
			return m.FromShards([][]float32{make([]float32, 3), make([]float32, 3), make([]float32, 2), make([]float32, 3)}, 3)
		}, "dtensor: shapes do not fit: fromshards: shard 2 of 2 elements to shape (3)", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.call()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || errors.Is(err, dtensor.ErrShape) != tc.shape || out != nil {
				t.Fatalf("got %v, %v; want the error %q", out, err, tc.want)
			}
		})
	}
}
