package dtensor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// takeOut takes the ops that make the tensors asked for, but those an op
// left in the outbox reads, directly or through another it keeps; and
// only ops a proc may keep pending.
func TestTakeOut(t *testing.T) {
	m := &Mesh{out: []op{
		{Kind: "drop", In: []uint64{9}},
		{Kind: "matmul", Out: 1, In: []uint64{8, 7}},
		{Kind: "relu", Out: 2, In: []uint64{1}},
		{Kind: "add", Out: 3, In: []uint64{2, 6}},
		{Kind: "unary", Name: "exp", Out: 4, In: []uint64{1}},
		{Kind: "pack", Out: 5, In: []uint64{4}}, // not asked for: 4 stays, and 1 it reads
		{Kind: "rand", Out: 10},
		{Kind: "relu", Out: 11, In: []uint64{3}},
	}}
	taken := m.takeOut(map[uint64]bool{1: true, 2: true, 3: true, 4: true, 10: true, 11: true})
	var got, left []uint64
	for _, o := range taken {
		got = append(got, o.Out)
	}
	for _, o := range m.out {
		left = append(left, o.Out)
	}
	// 2 reads 1, which stays: 2 can go (the proc keeps 1's result); 10 is
	// not an op Grad differentiates.
	if want := []uint64{2, 3, 11}; !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	if want := []uint64{0, 1, 4, 5, 10}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// takeOut leaves an op whose input an op left after it frees (a drop, an
// update in place), and with it the ops that make its inputs; an op that
// reads it may go (the proc keeps its result).
func TestTakeOutFreed(t *testing.T) {
	m := &Mesh{out: []op{
		{Kind: "matmul", Out: 1, In: []uint64{8, 7}},
		{Kind: "unary", Name: "exp", Out: 2, In: []uint64{1}},
		{Kind: "relu", Out: 3, In: []uint64{9}},
		{Kind: "scale", Out: 4, In: []uint64{3}},
		{Kind: "drop", In: []uint64{1}},
		{Kind: "optimize", Out: 5, In: []uint64{9, 6}},
		{Kind: "sum", Out: 10, In: []uint64{2}},
	}}
	taken := m.takeOut(map[uint64]bool{1: true, 2: true, 3: true, 4: true, 10: true})
	var got, left []uint64
	for _, o := range taken {
		got = append(got, o.Out)
	}
	for _, o := range m.out {
		left = append(left, o.Out)
	}
	// 2 reads 1, which the drop frees; 3 reads 9, which the update
	// replaces; 4 reads 3, which stays.
	if want := []uint64{4, 10}; !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	if want := []uint64{1, 2, 3, 0, 5}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// deferredGrad is, on this process's store, the grad op Grad sends for
// the loss sum(relu(x)) by x, x = (-1, 2, 3): its forward ops (relu,
// then sum) deferred, the loss's shape given as shape. It returns the
// op, and the ids of x, relu(x) and the loss.
func deferredGrad(t *testing.T, shape []int) (o op, x, r, l uint64) {
	x, r, l, graph := newID(), newID(), newID(), newID()
	put(x, tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{-1, 2, 3})), nil)
	t.Cleanup(func() {
		gradFree(context.Background(), op{Seed: graph}, nil)
		store.Lock()
		delete(store.m, x)
		delete(store.m, r)
		delete(store.m, l)
		store.Unlock()
	})
	o = op{
		Kind: "grad", Out: newID(), In: []uint64{l, x}, Seed: graph, Leaves: []uint64{x}, Index: 0, Shape: shape,
		Graph: []gradNode{{}, {Kind: "relu", In: []int{0}}, {Kind: "sum", In: []int{1}}}, Wrt: []int{0},
		Defer: []op{{Kind: "relu", Out: r, In: []uint64{x}}, {Kind: "sum", Out: l, In: []uint64{r}}},
	}
	t.Cleanup(func() {
		store.Lock()
		delete(store.m, o.Out)
		store.Unlock()
	})
	return o, x, r, l
}

// A loss shape off the wire of one element by its product but not of one
// element ((-1, -1)) is not the shape of the loss taken from the
// gradient's run: the loss's op runs when it is read, and nothing
// panics.
func TestDeferredLossShape(t *testing.T) {
	for _, shape := range [][]int{{-1, -1}, {-1, 1, -1}, {1, 1}} {
		o, _, _, l := deferredGrad(t, shape)
		if _, err := runAndKeep(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		g, err := get(o.Out)
		if err != nil || !slices.Equal(g.Float64s(), []float64{0, 1, 1}) {
			t.Fatalf("loss of shape %v: gradient %v, %v", shape, g, err)
		}
		loss, err := get(l)
		if err != nil || !slices.Equal(loss.Float64s(), []float64{5}) {
			t.Fatalf("loss of shape %v: %v, %v", shape, loss, err)
		}
	}
}

// A proc keeps at most maxProcGraphs compiled graphs, whatever its
// clients send: past that a new graph is refused, with an error that
// names the bound, and the proc keeps no more; one it has still runs.
func TestProcGraphsBounded(t *testing.T) {
	o, _, _, _ := deferredGrad(t, nil)
	o.Defer, o.In = nil, nil
	if _, _, err := gradient(o); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	refused := 0
	t.Cleanup(func() {
		for _, id := range ids {
			gradFree(context.Background(), op{Seed: id}, nil)
		}
	})
	for range 2 * maxProcGraphs {
		id := newID()
		ids = append(ids, id)
		fresh := o
		fresh.Seed = id
		_, _, err := gradient(fresh)
		compiled.Lock()
		n := len(compiled.m)
		compiled.Unlock()
		if n > maxProcGraphs {
			t.Fatalf("a proc keeps %d compiled graphs, past %d", n, maxProcGraphs)
		}
		if err == nil {
			continue
		}
		refused++
		if !strings.Contains(err.Error(), fmt.Sprintf("keeps %d compiled graphs, its most (maxProcGraphs)", maxProcGraphs)) {
			t.Fatalf("graph %d: %v", len(ids), err)
		}
	}
	if refused < maxProcGraphs {
		t.Fatalf("%d of %d graphs refused", refused, 2*maxProcGraphs)
	}
	if _, _, err := gradient(o); err != nil {
		t.Fatalf("a graph kept: %v", err)
	}
}

// A grad op's deferred ops run only when read: after it, the loss holds
// the value of the gradient's run, its op never run, and the forward op
// before it (relu) is still pending, its inputs held; read, it runs.
func TestDeferredNotComputed(t *testing.T) {
	o, _, r, l := deferredGrad(t, []int{1})
	if _, err := runAndKeep(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if g, err := get(o.Out); err != nil || !slices.Equal(g.Float64s(), []float64{0, 1, 1}) {
		t.Fatalf("gradient %v, %v", g, err)
	}
	store.Lock()
	pe, le := store.m[r], store.m[l]
	store.Unlock()
	if pe.p == nil || le.p == nil {
		t.Fatalf("relu(x) and the loss kept as %+v, %+v; want pending", pe, le)
	}
	if pe.p.t != nil || pe.p.err != nil || pe.p.ins == nil {
		t.Fatalf("relu(x), read by nothing, was computed: %v, %v", pe.p.t, pe.p.err)
	}
	if le.p.t == nil || le.p.ins != nil || !slices.Equal(le.p.t.Float64s(), []float64{5}) {
		t.Fatalf("the loss: %v, its inputs held %v; want 5 from the gradient's run", le.p.t, le.p.ins != nil)
	}
	if got, err := get(r); err != nil || !slices.Equal(got.Float64s(), []float64{0, 2, 3}) || pe.p.ins != nil {
		t.Fatalf("relu(x) read: %v, %v", got, err)
	}
}
