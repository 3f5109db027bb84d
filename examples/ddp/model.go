package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The model: a 2-layer perceptron, p = sigmoid(relu(X·W1 + b1)·W2 + b2),
// trained on the mean binary cross-entropy, written as
// mean(softplus(z) - y·z) with z the last layer's output (the same loss,
// without log of a sigmoid that rounds to 0). The training on the procs
// (main.go) writes it with dtensor's ops; the single-process training it
// is checked against builds it here, in gorgonia, on all the rows.

// Dims of the synthetic problem and of the model.
const (
	features = 8
	hidden   = 16
	rows     = 512
)

// shapes are the parameters' shapes: W1, b1, W2, b2.
var shapes = [][]int{{features, hidden}, {hidden}, {hidden, 1}, {1}}

// dataset makes the whole synthetic dataset from seed: rows of features
// (row-major, rows x features), labelled by a hidden nonlinear rule with
// some noise (rows x 1).
func dataset(seed uint64) (x, y []float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	rule := make([]float64, features)
	for j := range rule {
		rule[j] = r.NormFloat64()
	}
	for range rows {
		z := 0.3
		for j := range features {
			v := r.NormFloat64()
			x = append(x, v)
			z += v * rule[j]
		}
		label := 0.0
		if math.Abs(z)-1+0.3*r.NormFloat64() > 0 {
			label = 1
		}
		y = append(y, label)
	}
	return x, y
}

// initial is the parameters' starting values from seed: the weights
// normal, scaled by their fan-in, the biases 0.
func initial(seed uint64) [][]float64 {
	r := rand.New(rand.NewPCG(seed, 2))
	ps := make([][]float64, len(shapes))
	for i, s := range shapes {
		ps[i] = make([]float64, product(s))
		if len(s) == 2 {
			for j := range ps[i] {
				ps[i][j] = r.NormFloat64() / math.Sqrt(float64(s[0]))
			}
		}
	}
	return ps
}

func product(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// model is the graph of the loss over some rows, in gorgonia.
type model struct {
	params []*gorgonia.Node // W1, b1, W2, b2
	loss   *gorgonia.Node
	grads  gorgonia.Nodes // of loss with respect to params
	vm     gorgonia.VM
}

// newModel builds the loss of the rows x, y and its gradients.
func newModel(x, y []float64) (*model, error) {
	n := len(y)
	g := gorgonia.NewGraph()
	X := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(n, features), gorgonia.WithName("X"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(n, features), tensor.WithBacking(append([]float64(nil), x...)))))
	Y := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(n, 1), gorgonia.WithName("y"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(append([]float64(nil), y...)))))
	m := &model{}
	for i, s := range shapes {
		v := tensor.New(tensor.WithShape(s...), tensor.WithBacking(make([]float64, product(s))))
		m.params = append(m.params, gorgonia.NodeFromAny(g, v, gorgonia.WithName(fmt.Sprintf("p%d", i))))
	}
	var err error
	must := func(n *gorgonia.Node, e error) *gorgonia.Node {
		if e != nil && err == nil {
			err = e
		}
		return n
	}
	// A bias of shape (k) added to every row of an (n, k) matrix.
	addRows := func(a, b *gorgonia.Node, k int) *gorgonia.Node {
		return must(gorgonia.BroadcastAdd(a, must(gorgonia.Reshape(b, tensor.Shape{1, k})), nil, []byte{0}))
	}
	h := must(gorgonia.Rectify(addRows(must(gorgonia.Mul(X, m.params[0])), m.params[1], hidden)))
	z := addRows(must(gorgonia.Mul(h, m.params[2])), m.params[3], 1)
	perRow := must(gorgonia.Sub(must(gorgonia.Softplus(z)), must(gorgonia.HadamardProd(Y, z))))
	m.loss = must(gorgonia.Mean(perRow))
	if err != nil {
		return nil, fmt.Errorf("the model's graph: %w", err)
	}
	if m.grads, err = gorgonia.Grad(m.loss, m.params...); err != nil {
		return nil, fmt.Errorf("the model's gradients: %w", err)
	}
	m.vm = gorgonia.NewTapeMachine(g)
	return m, nil
}

// eval runs the graph at the parameters ps and returns the mean loss and
// its gradient by each parameter.
func (m *model) eval(ps [][]float64) (loss float64, grads [][]float64, err error) {
	for i, p := range ps {
		if err := gorgonia.Let(m.params[i], tensor.New(tensor.WithShape(shapes[i]...), tensor.WithBacking(append([]float64(nil), p...)))); err != nil {
			return 0, nil, err
		}
	}
	m.vm.Reset()
	if err := m.vm.RunAll(); err != nil {
		return 0, nil, err
	}
	for _, g := range m.grads {
		grads = append(grads, append([]float64(nil), g.Value().Data().([]float64)...))
	}
	return m.loss.Value().Data().(float64), grads, nil
}

// adam is Adam's state for the parameters, as dtensor.Adam updates them.
type adam struct {
	lr, beta1, beta2, eps float64
	t                     int
	m, v                  [][]float64
}

func newAdam(lr float64) *adam {
	a := &adam{lr: lr, beta1: 0.9, beta2: 0.999, eps: 1e-8}
	for _, s := range shapes {
		a.m, a.v = append(a.m, make([]float64, product(s))), append(a.v, make([]float64, product(s)))
	}
	return a
}

// step updates ps from their gradients.
func (a *adam) step(ps, grads [][]float64) {
	a.t++
	c1, c2 := 1-math.Pow(a.beta1, float64(a.t)), 1-math.Pow(a.beta2, float64(a.t))
	for i, p := range ps {
		for j, g := range grads[i] {
			a.m[i][j] = a.beta1*a.m[i][j] + (1-a.beta1)*g
			a.v[i][j] = a.beta2*a.v[i][j] + (1-a.beta2)*g*g
			p[j] -= a.lr * (a.m[i][j] / c1) / (math.Sqrt(a.v[i][j]/c2) + a.eps)
		}
	}
}
