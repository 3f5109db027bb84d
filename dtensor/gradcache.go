package dtensor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Compiled gradients. A training loop sends the same graph every step
// (new tensors, the same ops on the same shapes), and Grad sends one
// grad op per parameter over that graph. Building, differentiating and
// compiling it in gorgonia is most of a small step's time, and decoding
// it on every proc at every op is much of the rest, so the graph travels
// once. The client's mesh names each graph it sent by an id (op.Seed),
// by its structure (the ops, their parameters and inputs, the leaves'
// shapes and element types, the parameters differentiated for: op.Wrt);
// a grad op carries the graph (op.Graph) only the first time, and always
// the id and its leaves' tensors (op.Leaves). Each proc compiles the
// graph when it arrives and keeps it under that id: a step binds the new
// leaves' values (gorgonia.Let) and runs the tape again. The gradients of
// every parameter of one Grad come from one run: the grad ops after the
// first find the leaves they would bind already bound (the same stored
// shards) and take their gradient from that run. A mesh keeps at most
// maxGraphs graphs on its procs: past that the oldest is freed there
// (the op gradfree). A proc keeps at most maxProcGraphs, whatever its
// clients send (one that abandons a mesh frees nothing): past that, a new
// graph is refused.

const (
	// maxGraphs bounds the graphs a mesh keeps on its procs.
	maxGraphs = 16
	// maxProcGraphs bounds the graphs a proc keeps, of all its meshes.
	maxProcGraphs = 4 * maxGraphs
)

// graphKey is the structure of graph, with its leaves' tensors, and wrt.
func graphKey(graph []gradNode, leaves []*Tensor, wrt []int) string {
	b := make([]byte, 0, 32*len(graph))
	ints := func(xs []int) {
		for _, x := range xs {
			b = strconv.AppendInt(append(b, ','), int64(x), 10)
		}
		b = append(b, ';')
	}
	li := 0
	for _, n := range graph {
		if n.Kind == "" {
			t := leaves[li]
			li++
			b = append(append(b, 'L'), t.dtype...)
			ints(t.shape)
			continue
		}
		b = append(append(append(append(b, n.Kind...), ' '), n.Name...), ' ')
		b = strconv.AppendFloat(b, n.Value, 'g', -1, 64)
		b = strconv.AppendInt(append(b, ' '), int64(n.Index), 10)
		ints(n.Shape)
		ints(n.In)
	}
	b = append(b, "wrt"...)
	ints(wrt)
	return string(b)
}

// graphID is the id of the graph of structure key on m's procs, and
// whether it is new: then the first op that names it must carry it. The
// oldest graph past maxGraphs is freed on the procs. Called with m.gradMu
// held, which keeps the ops that send a graph before those that name it.
func (m *Mesh) graphID(key string) (id uint64, fresh bool, err error) {
	if id, ok := m.graphs[key]; ok {
		return id, false, nil
	}
	if len(m.graphOrder) >= maxGraphs {
		old := m.graphOrder[0]
		if _, err := m.record(op{Kind: "gradfree", Seed: m.graphs[old]}, nil, nil); err != nil {
			return 0, false, err
		}
		m.forgetGraph(old)
	}
	if m.graphs == nil {
		m.graphs = map[string]uint64{}
	}
	id = newID()
	m.graphs[key] = id
	m.graphOrder = append(m.graphOrder, key)
	return id, true, nil
}

// forgetGraph drops the graph of structure key from m's list. Called
// with m.gradMu held.
func (m *Mesh) forgetGraph(key string) {
	delete(m.graphs, key)
	m.graphOrder = slices.DeleteFunc(m.graphOrder, func(k string) bool { return k == key })
}

// compiled is this proc's compiled graphs, by id.
var compiled = struct {
	sync.Mutex
	m map[uint64]*compiledGrad
}{m: map[uint64]*compiledGrad{}}

// compiledGrad is one graph, compiled, with its last run; or, for a
// graph that could not be compiled, why (err), for every op that names
// it.
type compiledGrad struct {
	err    error
	vm     gorgonia.VM
	tape   tape             // vm's counter and registers (tape.go)
	inputs []*gorgonia.Node // the leaves' nodes, in the graph's order
	wrt    []int            // graph indices differentiated for
	grads  []*gorgonia.Node // their gradients, in that order
	loss   *gorgonia.Node   // the loss, a scalar (its sum if it was not)
	// bound are the shards of the last run's leaves, kept (so that no
	// other shard takes their address), and out its gradients.
	bound []*tensor.Dense
	out   []*tensor.Dense
	lossV any // the loss's value in that run: a float64 or float32, or nil
	// values are the leaves' values the tape reads, copies of the
	// shards, made at the first run and written over at each.
	values []any
}

// gradient is the gradient of the loss of o's graph (its last node) by
// its node o.Index, on this proc's shards of o.Leaves, and the loss's
// value (a float64 or float32, or nil): from the last run of the
// compiled graph if that run bound the same shards, else from a new run.
// The graph is compiled when o carries it.
func gradient(o op) (*tensor.Dense, any, error) {
	leaves := make([]*tensor.Dense, len(o.Leaves))
	for i, id := range o.Leaves {
		t, err := get(id)
		if err != nil {
			return nil, nil, err
		}
		leaves[i] = t
	}
	compiled.Lock()
	defer compiled.Unlock()
	c := compiled.m[o.Seed]
	if c == nil {
		if o.Graph == nil {
			return nil, nil, fmt.Errorf("dtensor: grad: graph %d is not on this proc (freed, or the op that carried it did not arrive)", o.Seed)
		}
		if len(compiled.m) >= maxProcGraphs {
			return nil, nil, fmt.Errorf("dtensor: grad: graph %d refused: this proc keeps %d compiled graphs, its most (maxProcGraphs); free some (gradfree)", o.Seed, len(compiled.m))
		}
		c = compile(o.Graph, leaves, o.Wrt)
		compiled.m[o.Seed] = c
	}
	if c.err != nil {
		return nil, nil, c.err
	}
	if len(leaves) != len(c.inputs) {
		return nil, nil, fmt.Errorf("dtensor: grad: %d leaves for a graph of %d", len(leaves), len(c.inputs))
	}
	for i, t := range leaves {
		in := c.inputs[i]
		if t.Dtype() != in.Dtype() || !t.Shape().Eq(in.Shape()) {
			return nil, nil, fmt.Errorf("dtensor: grad: leaf %d is %v %v, the graph's is %v %v", i, t.Dtype(), t.Shape(), in.Dtype(), in.Shape())
		}
	}
	at := slices.Index(c.wrt, o.Index)
	if at < 0 {
		return nil, nil, fmt.Errorf("dtensor: grad: node %d is not one the graph is differentiated for (%v)", o.Index, c.wrt)
	}
	if !slices.Equal(c.bound, leaves) {
		if err := c.run(leaves); err != nil {
			return nil, nil, err
		}
	}
	return c.out[at], c.lossV, nil
}

// gradFree is the op "gradfree": the graph o.Seed goes.
func gradFree(_ context.Context, o op, _ []*tensor.Dense) (*tensor.Dense, error) {
	compiled.Lock()
	defer compiled.Unlock()
	if c := compiled.m[o.Seed]; c != nil {
		if c.vm != nil {
			c.vm.Close()
		}
		delete(compiled.m, o.Seed)
	}
	return nil, nil
}

// compile builds graph in gorgonia with a placeholder for each leaf (of
// the shape and type of leaves, in order), differentiates its loss by
// the nodes wrt and compiles it. A graph that cannot be compiled gives
// its error in err.
func compile(graph []gradNode, leaves []*tensor.Dense, wrt []int) *compiledGrad {
	c := &compiledGrad{wrt: wrt}
	c.err = c.compile(graph, leaves)
	return c
}

func (c *compiledGrad) compile(graph []gradNode, leaves []*tensor.Dense) error {
	if len(graph) == 0 {
		return fmt.Errorf("dtensor: grad: an empty graph")
	}
	for _, w := range c.wrt {
		if w < 0 || w >= len(graph) {
			return fmt.Errorf("dtensor: grad of node %d of %d", w, len(graph))
		}
	}
	g := gorgonia.NewGraph()
	nodes := make([]*gorgonia.Node, len(graph))
	for i, n := range graph {
		for _, in := range n.In {
			if in < 0 || in >= i {
				return fmt.Errorf("dtensor: grad: node %d reads node %d", i, in)
			}
		}
		if n.Kind == "" {
			li := len(c.inputs)
			if li >= len(leaves) {
				return fmt.Errorf("dtensor: grad: a graph of more leaves than the %d given", len(leaves))
			}
			nodes[i] = placeholder(g, leaves[li], "t"+strconv.Itoa(i))
			c.inputs = append(c.inputs, nodes[i])
			continue
		}
		build, ok := differentiable[n.Kind]
		if !ok {
			return fmt.Errorf("dtensor: grad: no gradient of op %q", n.Kind)
		}
		in := make([]*gorgonia.Node, len(n.In))
		for j, k := range n.In {
			in[j] = nodes[k]
		}
		node, err := build(n, in)
		if err != nil {
			return fmt.Errorf("dtensor: grad: %s: %w", n.Kind, err)
		}
		nodes[i] = node
	}
	loss := nodes[len(nodes)-1]
	if !loss.IsScalar() {
		var err error
		if loss, err = gorgonia.Sum(loss); err != nil {
			return err
		}
	}
	by := make([]*gorgonia.Node, len(c.wrt))
	for i, w := range c.wrt {
		by[i] = nodes[w]
	}
	grads, err := gorgonia.Grad(loss, by...)
	if err != nil {
		return fmt.Errorf("dtensor: grad: %w", err)
	}
	c.grads, c.loss = grads, loss
	c.vm = gorgonia.NewTapeMachine(g)
	c.tape = tapeOf(c.vm)
	return nil
}

// placeholder is a leaf of t's element type and shape, bound to a value
// at each run.
func placeholder(g *gorgonia.ExprGraph, t *tensor.Dense, name string) *gorgonia.Node {
	s := t.Shape()
	switch {
	case s.IsScalar():
		return gorgonia.NewScalar(g, t.Dtype(), gorgonia.WithName(name))
	case len(s) == 1:
		return gorgonia.NewVector(g, t.Dtype(), gorgonia.WithShape(s...), gorgonia.WithName(name))
	case len(s) == 2:
		return gorgonia.NewMatrix(g, t.Dtype(), gorgonia.WithShape(s...), gorgonia.WithName(name))
	}
	return gorgonia.NewTensor(g, t.Dtype(), len(s), gorgonia.WithShape(s...), gorgonia.WithName(name))
}

// run binds leaves to the placeholders and runs the tape; the gradients
// are copied out (the next run writes over the tape's own).
func (c *compiledGrad) run(leaves []*tensor.Dense) error {
	c.bound, c.out, c.lossV = nil, nil, nil
	if c.values == nil {
		c.values = make([]any, len(leaves))
	}
	for i, t := range leaves {
		// The tape reads copies: it must not write into a shard.
		switch d, _ := c.values[i].(*tensor.Dense); {
		case t.Shape().IsScalar():
			c.values[i] = t.Data() // a scalar placeholder takes a scalar
		case d == nil || t.CopyTo(d) != nil:
			c.values[i] = t.Clone()
		}
		if err := gorgonia.Let(c.inputs[i], c.values[i]); err != nil {
			return fmt.Errorf("dtensor: grad: %w", err)
		}
	}
	// The last run's registers are this run's (tape.go): its values are
	// copied out below.
	c.tape.rewind(c.values)
	if err := c.vm.RunAll(); err != nil {
		return fmt.Errorf("dtensor: grad: %w", err)
	}
	out := make([]*tensor.Dense, len(c.grads))
	for i, gn := range c.grads {
		switch v := gn.Value().(type) {
		case *tensor.Dense:
			out[i] = v.Clone().(*tensor.Dense)
		case gorgonia.Scalar:
			out[i] = tensor.New(tensor.FromScalar(v.Data()))
		default:
			return fmt.Errorf("dtensor: grad: a gradient of %T", gn.Value())
		}
	}
	c.bound, c.out = leaves, out
	if v, ok := c.loss.Value().(gorgonia.Scalar); ok {
		c.lossV = v.Data()
	}
	return nil
}
