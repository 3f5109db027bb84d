package dtensor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Gradients. The client keeps, for every tensor, the op that made it and
// its inputs. Grad walks back from the loss to the parameters and sends
// every proc the graph between them; each proc builds it in gorgonia from
// its own shards (leaves: the parameters and every tensor the loss
// depends on through an op Grad does not differentiate, such as data),
// differentiates it symbolically (gorgonia.Grad) and keeps the gradient
// as a new tensor. The gradients are each proc's own; combine them across
// procs with Reduce (data parallelism: their mean). The ops of the graph
// not sent yet travel with the gradient, and run only if their results
// are read (deferred.go).

// ErrNoGradient: a parameter the loss does not depend on.
var ErrNoGradient = errors.New("dtensor: the loss does not depend on the parameter")

// gradNode is one node of the graph a proc builds: a leaf (no Kind: a
// tensor of the store, named by the grad op's Leaves in the order of the
// leaves) or an op (Kind and its parameters) on earlier nodes.
type gradNode struct {
	Kind  string  `msgpack:"k,omitempty"` // an op of differentiable
	In    []int   `msgpack:"i,omitempty"` // its inputs: earlier nodes
	Name  string  `msgpack:"n,omitempty"`
	Value float64 `msgpack:"v,omitempty"`
	Index int     `msgpack:"x,omitempty"`
	Shape []int   `msgpack:"s,omitempty"`
}

// differentiable are the ops Grad differentiates through, each as a
// gorgonia op on the nodes of its inputs.
var differentiable = map[string]func(n gradNode, in []*gorgonia.Node) (*gorgonia.Node, error){
	"add":       binaryNode("add"),
	"sub":       binaryNode("sub"),
	"mul":       binaryNode("mul"),
	"div":       binaryNode("div"),
	"matmul":    func(_ gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Mul(in[0], in[1]) },
	"transpose": func(_ gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Transpose(in[0]) },
	"relu":      func(_ gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.Rectify(in[0]) },
	"scale": func(n gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		return gorgonia.Mul(in[0], constantOf(in[0], n.Value))
	},
	"shift": func(n gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		return gorgonia.Add(in[0], constantOf(in[0], n.Value))
	},
	"unary": func(n gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		switch n.Name {
		case "exp":
			return gorgonia.Exp(in[0])
		case "log":
			return gorgonia.Log(in[0])
		case "tanh":
			return gorgonia.Tanh(in[0])
		case "sigmoid":
			return gorgonia.Sigmoid(in[0])
		case "softplus":
			return gorgonia.Softplus(in[0])
		}
		return nil, fmt.Errorf("dtensor: no gradient of %q", n.Name)
	},
	"sum": func(n gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		if n.Value != 0 {
			return gorgonia.Mean(in[0], n.Index)
		}
		return gorgonia.Sum(in[0], n.Index)
	},
	"reshape": func(n gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		return gorgonia.Reshape(in[0], tensor.Shape(n.Shape))
	},
	"row": func(n gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		return gorgonia.Slice(in[0], gorgonia.S(n.Index))
	},
	"softmax": func(_ gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		return gorgonia.SoftMax(in[0], len(in[0].Shape())-1)
	},
}

// constantOf is v as a constant of like's element type.
func constantOf(like *gorgonia.Node, v float64) *gorgonia.Node {
	if like.Dtype() == tensor.Float32 {
		return gorgonia.NewConstant(float32(v))
	}
	return gorgonia.NewConstant(v)
}

// binaryNode is the gorgonia node of a binary elementwise op, broadcast.
func binaryNode(kind string) func(gradNode, []*gorgonia.Node) (*gorgonia.Node, error) {
	return func(_ gradNode, in []*gorgonia.Node) (*gorgonia.Node, error) {
		return broadcastNode(kind, in[0], in[1])
	}
}

// Grad is the gradient of loss, a tensor of one element per proc, with
// respect to each of params: on every proc, the derivative of that
// proc's loss by that proc's shard of the parameter, as a tensor of the
// parameter's shape and element type (float64 or float32: gorgonia
// computes in the tensors' own type). The loss is differentiated through the ops in
// differentiable (add, sub, mul, div, matmul, transpose, relu, scale,
// shift, exp, log, tanh, sigmoid, softplus, sum, mean, reshape, row, softmax);
// anything else it
// depends on is a constant. A parameter the loss does not depend on is
// ErrNoGradient.
func Grad(ctx context.Context, loss *Tensor, params ...*Tensor) ([]*Tensor, error) {
	for _, t := range append([]*Tensor{loss}, params...) {
		if err := t.usable("grad"); err != nil {
			return nil, err
		}
	}
	if loss.shape.TotalSize() != 1 {
		return nil, fmt.Errorf("%w: the loss of a gradient must have one element per proc, not %v (Sum or Mean it)", ErrShape, loss.shape)
	}
	graph, index, leaves := gradGraph(loss, params)
	wrt := make([]int, len(params))
	for i, p := range params {
		at, ok := index[p]
		if !ok || !dependsOn(graph, len(graph)-1, at) {
			return nil, fmt.Errorf("%w: parameter %d (%v)", ErrNoGradient, i, p)
		}
		wrt[i] = at
	}
	ids := make([]uint64, len(leaves))
	for i, t := range leaves {
		ids[i] = t.id
	}
	m := loss.mesh
	// The graph's ops and theirs are queued in order: a proc learns a
	// graph before the ops that name it.
	m.gradMu.Lock()
	defer m.gradMu.Unlock()
	key := graphKey(graph, leaves, wrt)
	id, fresh, err := m.graphID(key)
	if err != nil {
		return nil, err
	}
	// The ops that make the graph's nodes, not sent yet, go with the
	// first grad op, kept on the procs until read (deferred.go); back to
	// the outbox if it cannot be recorded.
	made := map[uint64]bool{}
	for t, i := range index {
		if graph[i].Kind != "" {
			made[t.id] = true
		}
	}
	deferred := m.takeOut(made)
	out := make([]*Tensor, len(params))
	for i, p := range params {
		o := op{Kind: "grad", Seed: id, Leaves: ids, Index: wrt[i], DType: p.dtype}
		if i == 0 && fresh {
			o.Graph, o.Wrt = graph, wrt
		}
		if i == 0 && deferred != nil {
			o.Defer, o.Shape = deferred, loss.shape
		}
		g, err := m.record(o, []*Tensor{loss, p}, nil)
		if err != nil {
			if i == 0 && fresh {
				m.forgetGraph(key) // the procs may not have it
			}
			if i == 0 {
				m.putBack(deferred)
			}
			return nil, err
		}
		out[i] = g
	}
	return out, nil
}

// gradGraph lists the nodes from the leaves to loss (the last), where
// each tensor is among them, and the leaves' tensors in the order of
// their nodes. Parameters are leaves, whatever made them.
func gradGraph(loss *Tensor, params []*Tensor) ([]gradNode, map[*Tensor]int, []*Tensor) {
	var nodes []gradNode
	var leaves []*Tensor
	index := map[*Tensor]int{}
	var visit func(t *Tensor) int
	visit = func(t *Tensor) int {
		if i, ok := index[t]; ok {
			return i
		}
		n := gradNode{}
		if _, ok := differentiable[t.src.Kind]; ok && !slices.Contains(params, t) {
			n = gradNode{Kind: t.src.Kind, Name: t.src.Name, Value: t.src.Value, Index: t.src.Index, Shape: t.src.Shape}
			for _, in := range t.ins {
				n.In = append(n.In, visit(in))
			}
		} else {
			leaves = append(leaves, t)
		}
		nodes = append(nodes, n)
		index[t] = len(nodes) - 1
		return len(nodes) - 1
	}
	visit(loss)
	return nodes, index, leaves
}

// dependsOn reports whether node from reads node at, through the graph.
func dependsOn(graph []gradNode, from, at int) bool {
	if from == at {
		return true
	}
	for _, in := range graph[from].In {
		if dependsOn(graph, in, at) {
			return true
		}
	}
	return false
}

// gradShape: the parameter's shape (the op's second input).
func gradShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	if o.Index < 0 {
		return nil, fmt.Errorf("dtensor: grad of node %d", o.Index)
	}
	return in[1].Clone(), nil
}

// runGrad differentiates the loss (the last node of the graph) by node
// o.Index on this proc's shards (gradcache.go: with the graph compiled
// once, and every parameter of the same Grad, o.Wrt, from one run) and
// returns the gradient.
func runGrad(_ context.Context, o op, params []*tensor.Dense) (*tensor.Dense, error) {
	g, _, err := gradient(o)
	if err != nil {
		return nil, err
	}
	// The parameter's shape, which gorgonia may have written otherwise
	// (a column for (n, 1)), on the memory of the run's copy of the
	// gradient, which nothing writes into (no op writes into its inputs).
	d := g.ShallowClone()
	if err := d.Reshape(params[1].Shape()...); err != nil {
		return nil, fmt.Errorf("dtensor: grad: a gradient of shape %v for a parameter of %v", d.Shape(), params[1].Shape())
	}
	return d, nil
}
