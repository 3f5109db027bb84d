package main

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The model: logistic regression, p = sigmoid(X·w + b), trained on the
// mean binary cross-entropy, written as mean(softplus(z) - y·z) with
// z = X·w + b (the same loss, without log of a sigmoid that rounds to 0).
// Gorgonia builds the graph once per shard and differentiates it
// symbolically (gorgonia.Grad); each step sets w and b (gorgonia.Let) and
// runs the tape machine.

// Dims of the synthetic problem.
const (
	features = 8
	rows     = 512
)

// dataset makes the whole synthetic dataset from seed: rows of features,
// labelled by a hidden linear rule with some noise.
func dataset(seed uint64) (x [][]float64, y []float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	hidden := make([]float64, features)
	for j := range hidden {
		hidden[j] = r.NormFloat64()
	}
	for range rows {
		xi := make([]float64, features)
		z := 0.3
		for j := range xi {
			xi[j] = r.NormFloat64()
			z += xi[j] * hidden[j]
		}
		label := 0.0
		if z+0.5*r.NormFloat64() > 0 {
			label = 1
		}
		x, y = append(x, xi), append(y, label)
	}
	return x, y
}

// model is the graph of the loss over one shard of the data.
type model struct {
	g     *gorgonia.ExprGraph
	w, b  *gorgonia.Node
	loss  *gorgonia.Node
	grads gorgonia.Nodes // of loss with respect to w, b
	vm    gorgonia.VM
}

// newModel builds the loss of the shard x, y and its gradients.
func newModel(x [][]float64, y []float64) (*model, error) {
	n := len(x)
	flat := make([]float64, 0, n*features)
	for _, xi := range x {
		flat = append(flat, xi...)
	}
	g := gorgonia.NewGraph()
	X := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(n, features), gorgonia.WithName("X"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(n, features), tensor.WithBacking(flat))))
	Y := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(n), gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]float64(nil), y...)))))
	m := &model{g: g}
	m.w = gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(features), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Zeroes()))
	m.b = gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("b"), gorgonia.WithValue(0.0))
	var err error
	must := func(n *gorgonia.Node, e error) *gorgonia.Node {
		if e != nil && err == nil {
			err = e
		}
		return n
	}
	xw := must(gorgonia.Mul(X, m.w))
	z := must(gorgonia.Add(xw, m.b))
	perRow := must(gorgonia.Sub(must(gorgonia.Softplus(z)), must(gorgonia.HadamardProd(Y, z))))
	m.loss = must(gorgonia.Mean(perRow))
	if err != nil {
		return nil, fmt.Errorf("the model's graph: %w", err)
	}
	if m.grads, err = gorgonia.Grad(m.loss, m.w, m.b); err != nil {
		return nil, fmt.Errorf("the model's gradients: %w", err)
	}
	m.vm = gorgonia.NewTapeMachine(g)
	return m, nil
}

// eval runs the graph at parameters w, b and returns the shard's mean
// loss and its gradient: len(w) entries for w, then one for b.
func (m *model) eval(w []float64, b float64) (loss float64, grad []float64, err error) {
	if err := gorgonia.Let(m.w, tensor.New(tensor.WithShape(features), tensor.WithBacking(append([]float64(nil), w...)))); err != nil {
		return 0, nil, err
	}
	if err := gorgonia.Let(m.b, b); err != nil {
		return 0, nil, err
	}
	m.vm.Reset()
	if err := m.vm.RunAll(); err != nil {
		return 0, nil, err
	}
	grad = append(grad, m.grads[0].Value().Data().([]float64)...)
	grad = append(grad, m.grads[1].Value().Data().(float64))
	return m.loss.Value().Data().(float64), grad, nil
}

// sgd takes a step of size lr along -grad.
func sgd(w []float64, b *float64, grad []float64, lr float64) {
	for j := range w {
		w[j] -= lr * grad[j]
	}
	*b -= lr * grad[len(w)]
}
