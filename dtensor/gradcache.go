package dtensor

import (
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
// compiling it in gorgonia is most of a small step's time, so each proc
// keeps the graphs it compiled, by their structure (the ops, their
// parameters and inputs, the leaves' shapes and element types, the
// parameters differentiated for: op.Wrt): a step binds the new leaves'
// values (gorgonia.Let) and runs the tape again. The gradients of every
// parameter of one Grad come from one run: the grad ops after the first
// find the leaves they would bind already bound (the same stored shards)
// and take their gradient from that run.

// maxCompiled bounds the graphs a proc keeps: past it, the oldest goes.
const maxCompiled = 16

// compiled is the proc's compiled graphs, newest last.
var compiled struct {
	sync.Mutex
	graphs []*compiledGrad
}

// compiledGrad is one graph, compiled, with its last run.
type compiledGrad struct {
	key    string
	vm     gorgonia.VM
	leaves []int            // graph indices of the leaves
	inputs []*gorgonia.Node // the leaves' nodes, in that order
	wrt    []int            // graph indices differentiated for
	grads  []*gorgonia.Node // their gradients, in that order
	// bound are the shards of the last run's leaves, kept (so that no
	// other shard takes their address), and out its gradients.
	bound []*tensor.Dense
	out   []*tensor.Dense
}

// graphKey is the structure of graph, with its leaves' shards, and wrt.
func graphKey(graph []gradNode, leaves []*tensor.Dense, wrt []int) string {
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
			b = append(append(b, 'L'), t.Dtype().Name()...)
			ints(t.Shape())
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

// gradients are the gradients of graph's loss (its last node) with
// respect to its nodes wrt, on this proc's shards: from the last run of
// its compiled graph if that run bound the same shards, else from a new
// run (compiling the graph first if it is new here).
func gradients(graph []gradNode, wrt []int) (map[int]*tensor.Dense, error) {
	var leafAt []int
	var leaves []*tensor.Dense
	for i, n := range graph {
		for _, in := range n.In {
			if in < 0 || in >= i {
				return nil, fmt.Errorf("dtensor: grad: node %d reads node %d", i, in)
			}
		}
		if n.Kind != "" {
			continue
		}
		t, err := get(n.ID)
		if err != nil {
			return nil, err
		}
		leafAt, leaves = append(leafAt, i), append(leaves, t)
	}
	for _, w := range wrt {
		if w < 0 || w >= len(graph) {
			return nil, fmt.Errorf("dtensor: grad of node %d of %d", w, len(graph))
		}
	}
	key := graphKey(graph, leaves, wrt)
	compiled.Lock()
	defer compiled.Unlock()
	var c *compiledGrad
	for _, g := range compiled.graphs {
		if g.key == key {
			c = g
			break
		}
	}
	if c == nil {
		var err error
		if c, err = compile(graph, leafAt, leaves, wrt); err != nil {
			return nil, err
		}
		c.key = key
		if len(compiled.graphs) >= maxCompiled {
			old := compiled.graphs[0]
			old.vm.Close()
			compiled.graphs = slices.Delete(compiled.graphs, 0, 1)
		}
		compiled.graphs = append(compiled.graphs, c)
	}
	if !slices.Equal(c.bound, leaves) {
		if err := c.run(leaves); err != nil {
			return nil, err
		}
	}
	out := make(map[int]*tensor.Dense, len(wrt))
	for i, w := range c.wrt {
		out[w] = c.out[i]
	}
	return out, nil
}

// compile builds graph in gorgonia with a placeholder for each leaf,
// differentiates its loss by the nodes wrt and compiles it.
func compile(graph []gradNode, leafAt []int, leaves []*tensor.Dense, wrt []int) (*compiledGrad, error) {
	g := gorgonia.NewGraph()
	c := &compiledGrad{leaves: leafAt, wrt: wrt}
	nodes := make([]*gorgonia.Node, len(graph))
	li := 0
	for i, n := range graph {
		if n.Kind == "" {
			t := leaves[li]
			li++
			nodes[i] = placeholder(g, t, "t"+strconv.Itoa(i))
			c.inputs = append(c.inputs, nodes[i])
			continue
		}
		build, ok := differentiable[n.Kind]
		if !ok {
			return nil, fmt.Errorf("dtensor: grad: no gradient of op %q", n.Kind)
		}
		in := make([]*gorgonia.Node, len(n.In))
		for j, k := range n.In {
			in[j] = nodes[k]
		}
		node, err := build(n, in)
		if err != nil {
			return nil, fmt.Errorf("dtensor: grad: %s: %w", n.Kind, err)
		}
		nodes[i] = node
	}
	loss := nodes[len(nodes)-1]
	if !loss.IsScalar() {
		var err error
		if loss, err = gorgonia.Sum(loss); err != nil {
			return nil, err
		}
	}
	by := make([]*gorgonia.Node, len(wrt))
	for i, w := range wrt {
		by[i] = nodes[w]
	}
	grads, err := gorgonia.Grad(loss, by...)
	if err != nil {
		return nil, fmt.Errorf("dtensor: grad: %w", err)
	}
	c.grads = grads
	c.vm = gorgonia.NewTapeMachine(g)
	return c, nil
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
	c.bound, c.out = nil, nil
	for i, t := range leaves {
		var v any = t.Clone() // the tape must not write into a shard
		if t.Shape().IsScalar() {
			v = t.Data() // a scalar placeholder takes a scalar
		}
		if err := gorgonia.Let(c.inputs[i], v); err != nil {
			return fmt.Errorf("dtensor: grad: %w", err)
		}
	}
	c.vm.Reset()
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
	return nil
}
