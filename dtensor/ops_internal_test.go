package dtensor

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gorgonia.org/tensor"
)

// Every op of the table has a shape rule and a run function.
func TestOpTableEntries(t *testing.T) {
	for name, k := range ops {
		if k.shape == nil || k.run == nil {
			t.Errorf("op %q: shape rule set %v, run set %v", name, k.shape != nil, k.run != nil)
		}
	}
}

// A proc refuses, with an error and no panic, an op the table lacks, one
// with the wrong number of inputs, and one whose shapes do not fit.
func TestProcRefusesBadOps(t *testing.T) {
	const in, out = 1<<63 + 1, 1<<63 + 2 // ids newID does not make
	put(in, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, 4})), nil)
	t.Cleanup(func() {
		store.Lock()
		delete(store.m, in)
		delete(store.m, out)
		store.Unlock()
	})
	tests := []struct {
		name  string
		o     op
		want  string
		shape bool // errors.Is(err, ErrShape)
	}{
		{"unknown", op{Kind: "conv9d", In: []uint64{in}}, `dtensor: unknown op "conv9d"`, false},
		{"no name", op{}, `dtensor: unknown op ""`, false},
		{"too few inputs", op{Kind: "matmul", In: []uint64{in}}, `dtensor: op "matmul": 1 inputs, want 2`, false},
		{"too many inputs", op{Kind: "relu", In: []uint64{in, in}}, `dtensor: op "relu": 2 inputs, want 1`, false},
		{"misfit", op{Kind: "row", In: []uint64{in}, Index: 2}, `dtensor: shapes do not fit: row 2 of (2, 2)`, true},
		{"bad shape", op{Kind: "full", Shape: []int{-2, -3}}, `dtensor: shapes do not fit: full of shape (-2, -3)`, true},
		{"allreduce without a communicator", op{Kind: "allreduce", In: []uint64{in}, Name: Sum}, `dtensor: allreduce without a communicator`, false},
		{"allreduce of an unknown communicator", op{Kind: "allreduce", In: []uint64{in}, Name: Sum, CommID: "comm-x"},
			`dtensor: allreduce: communicator comm-x is not known on this proc (the op that carried it did not arrive)`, false},
		{"grad of an unknown graph", op{Kind: "grad", In: []uint64{in, in}, Seed: 7, Leaves: []uint64{in}},
			`dtensor: grad: graph 7 is not on this proc (freed, or the op that carried it did not arrive)`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(context.Background(), tt.o)
			if err == nil || err.Error() != tt.want || errors.Is(err, ErrShape) != tt.shape {
				t.Fatalf("run(%+v): %v, want %s", tt.o, err, tt.want)
			}
			// The handler of the remote function keeps the error as
			// the op's result.
			tt.o.Out = out
			if _, err := runAndKeep(context.Background(), tt.o); err != nil {
				t.Fatalf("runAndKeep: %v", err)
			}
			want := fmt.Sprintf("dtensor: tensor %d: %s", uint64(out), tt.want)
			if _, err := get(out); err == nil || err.Error() != want {
				t.Fatalf("result: %v, want %s", err, want)
			}
		})
	}
}
