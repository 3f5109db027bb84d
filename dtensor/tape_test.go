package dtensor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// tapeGraphs are graphs of every op Grad differentiates through, with
// their leaves' shapes and the nodes differentiated for: broadcasts,
// views (reshape, row, transpose) and reductions among them, where a
// register may end a run holding another's memory.
var tapeGraphs = []struct {
	name   string
	graph  []gradNode
	leaves [][]int
	wrt    []int
}{
	{"mlp", []gradNode{ // mean(softplus(relu(x·w1 + b1)·w2 + b2) - y*z)
		{}, {}, {Kind: "matmul", In: []int{0, 1}}, {}, {Kind: "add", In: []int{2, 3}}, {Kind: "relu", In: []int{4}},
		{}, {Kind: "matmul", In: []int{5, 6}}, {}, {Kind: "add", In: []int{7, 8}},
		{Kind: "unary", Name: "softplus", In: []int{9}}, {}, {Kind: "mul", In: []int{11, 9}}, {Kind: "sub", In: []int{10, 12}},
		{Kind: "sum", Value: 1, In: []int{13}},
	}, [][]int{{6, 4}, {4, 5}, {5}, {5, 1}, {1}, {6, 1}}, []int{1, 3, 6, 8}},
	{"views", []gradNode{ // sum(softmax(reshape(xᵀ))[row 1] * c) + mean(exp(x)/2 - tanh(x))
		{}, {Kind: "transpose", In: []int{0}}, {Kind: "reshape", Shape: []int{2, 6}, In: []int{1}}, {Kind: "softmax", In: []int{2}},
		{Kind: "row", Index: 1, In: []int{3}}, {}, {Kind: "mul", In: []int{4, 5}}, {Kind: "sum", In: []int{6}},
		{Kind: "unary", Name: "exp", In: []int{0}}, {Kind: "scale", Value: 0.5, In: []int{8}}, {Kind: "unary", Name: "tanh", In: []int{0}},
		{Kind: "sub", In: []int{9, 10}}, {Kind: "sum", Value: 1, In: []int{11}}, {Kind: "sum", Value: 1, In: []int{12}},
		{Kind: "add", In: []int{7, 13}},
	}, [][]int{{4, 3}, {6}}, []int{0, 5}},
	{"quotients", []gradNode{ // sum(log(sigmoid(x) + 1) / (w + 2)) over a broadcast column
		{}, {Kind: "unary", Name: "sigmoid", In: []int{0}}, {Kind: "shift", Value: 1, In: []int{1}}, {Kind: "unary", Name: "log", In: []int{2}},
		{}, {Kind: "shift", Value: 2, In: []int{4}}, {Kind: "div", In: []int{3, 5}}, {Kind: "sum", In: []int{6}}, {Kind: "sum", In: []int{7}},
	}, [][]int{{3, 4}, {3, 1}}, []int{0, 4}},
}

// randomLeaves are leaves of shapes, of element type dt, drawn from r.
func randomLeaves(r *rand.Rand, shapes [][]int, dt tensor.Dtype) []*tensor.Dense {
	out := make([]*tensor.Dense, len(shapes))
	for i, s := range shapes {
		d := tensor.New(tensor.WithShape(s...), tensor.Of(dt))
		for j := range d.Shape().TotalSize() {
			v := r.Float64()*2 - 1
			if dt == tensor.Float32 {
				d.Float32s()[j] = float32(v)
			} else {
				d.Float64s()[j] = v
			}
		}
		out[i] = d
	}
	return out
}

// TestTapeRewinds: a compiled graph run again on new leaves (rewound,
// its registers kept) gives exactly the gradients and loss a graph
// compiled for those leaves alone gives, run after run, for graphs of
// every differentiable op in float64 and float32; and the registers an
// alloc writes first hold, most of them, the same tensors from run to
// run (not allocated again; a register that ends a run holding another
// register's memory is dropped, as Reset drops it).
func TestTapeRewinds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, g := range tapeGraphs {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("%s/%v", g.name, dt), func(t *testing.T) {
				kept := compile(g.graph, randomLeaves(r, g.leaves, dt), g.wrt)
				if kept.err != nil {
					t.Fatal(kept.err)
				}
				if kept.tape.pc == nil || len(kept.tape.allocs) == 0 {
					t.Fatalf("gorgonia's tape machine is not of the layout tape.go knows (counter found %v, %d allocs): rewind falls back to Reset", kept.tape.pc != nil, len(kept.tape.allocs))
				}
				var regs map[int]any
				for run := range 4 {
					leaves := randomLeaves(r, g.leaves, dt)
					if err := kept.run(leaves); err != nil {
						t.Fatal(err)
					}
					fresh := compile(g.graph, leaves, g.wrt)
					if fresh.err != nil {
						t.Fatal(fresh.err)
					}
					if err := fresh.run(leaves); err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(kept.lossV) != fmt.Sprint(fresh.lossV) {
						t.Fatalf("run %d: loss %v, compiled afresh %v", run, kept.lossV, fresh.lossV)
					}
					for i := range fresh.out {
						if a, b := fmt.Sprint(kept.out[i].Data()), fmt.Sprint(fresh.out[i].Data()); a != b {
							t.Fatalf("run %d: gradient %d\n%s\ncompiled afresh\n%s", run, i, a, b)
						}
					}
					now := map[int]any{}
					for reg := range kept.tape.allocs {
						if d, ok := (*kept.tape.cpumem)[reg].(*tensor.Dense); ok {
							now[reg] = d
						}
					}
					same := 0
					for reg, d := range regs {
						if now[reg] == d {
							same++
						}
					}
					if run > 0 && 2*same < len(kept.tape.allocs) {
						t.Errorf("run %d: %d of the %d registers an alloc writes first hold last run's tensor", run, same, len(kept.tape.allocs))
					}
					if run == 3 {
						t.Logf("%d of the %d registers an alloc writes first kept", same, len(kept.tape.allocs))
					}
					regs = now
					fresh.vm.Close()
				}
				if len(regs) == 0 {
					t.Fatal("no register kept")
				}
			})
		}
	}
}
