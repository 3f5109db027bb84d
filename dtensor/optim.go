package dtensor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"gorgonia.org/tensor"
)

// Optimizers. An Optimizer updates parameters from their gradients where
// they are: Update sends each proc one op per parameter, which reads that
// proc's shards of the parameter and its gradient and the optimizer's
// state for it (momentum, Adam's moments and step count), kept on the
// proc beside the shards, and makes the updated parameter. Nothing is
// fetched to the client. With data parallelism the gradients are
// averaged first (Reduce, Mean), so every proc takes the same step and
// the copies of the parameters stay equal.

// ErrMesh: tensors of different meshes where one mesh is wanted.
var ErrMesh = errors.New("dtensor: tensors of different meshes")

// Rule is how an Optimizer updates a parameter: SGD or Adam.
type Rule interface {
	// rule is the op's name and its hyperparameters, or an error for
	// values it cannot take.
	rule() (name string, hyper []float64, err error)
}

// SGD is stochastic gradient descent with momentum, as PyTorch writes
// it: v = Momentum·v + g, then p = p - LR·v (Momentum 0: p = p - LR·g).
type SGD struct {
	LR       float64 // the learning rate
	Momentum float64 // in [0, 1)
}

func (r SGD) rule() (string, []float64, error) {
	if r.LR <= 0 || r.Momentum < 0 || r.Momentum >= 1 {
		return "", nil, fmt.Errorf("dtensor: SGD with learning rate %v and momentum %v (want > 0, and in [0, 1))", r.LR, r.Momentum)
	}
	return "sgd", []float64{r.LR, r.Momentum}, nil
}

// Adam is Adam (Kingma and Ba): at step t, m = Beta1·m + (1-Beta1)·g,
// v = Beta2·v + (1-Beta2)·g², and p = p - LR·m̂/(√v̂ + Eps) with
// m̂ = m/(1-Beta1^t) and v̂ = v/(1-Beta2^t). DefaultAdam gives the usual
// betas and epsilon.
type Adam struct {
	LR    float64 // the learning rate
	Beta1 float64 // the first moment's decay, in [0, 1)
	Beta2 float64 // the second moment's decay, in [0, 1)
	Eps   float64 // added to √v̂, > 0
}

// DefaultAdam is Adam at learning rate lr with Beta1 0.9, Beta2 0.999
// and Eps 1e-8.
func DefaultAdam(lr float64) Adam { return Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

func (r Adam) rule() (string, []float64, error) {
	if r.LR <= 0 || r.Beta1 < 0 || r.Beta1 >= 1 || r.Beta2 < 0 || r.Beta2 >= 1 || r.Eps <= 0 {
		return "", nil, fmt.Errorf("dtensor: Adam with %+v (want LR and Eps > 0, betas in [0, 1))", r)
	}
	return "adam", []float64{r.LR, r.Beta1, r.Beta2, r.Eps}, nil
}

// Optimizer updates a fixed list of parameters, all on one mesh, by a
// Rule. Its state lives on the procs until Free.
type Optimizer struct {
	mesh   *Mesh
	id     uint64
	name   string
	hyper  []float64
	params []*Tensor
}

// NewOptimizer is an optimizer of params by rule. The parameters must be
// tensors of one mesh.
func NewOptimizer(rule Rule, params ...*Tensor) (*Optimizer, error) {
	name, hyper, err := rule.rule()
	if err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("dtensor: an optimizer of no parameters")
	}
	for i, p := range params {
		if p == nil {
			return nil, fmt.Errorf("dtensor: optimizer: parameter %d is nil", i)
		}
		if p.err != nil {
			return nil, p.err
		}
		if p.mesh.procs != params[0].mesh.procs {
			return nil, fmt.Errorf("%w: optimizer: parameter %d on %v, parameter 0 on another mesh, %v", ErrMesh, i, p.mesh.Extent(), params[0].mesh.Extent())
		}
	}
	return &Optimizer{mesh: params[0].mesh, id: newID(), name: name, hyper: hyper, params: params}, nil
}

// Params are the optimizer's parameters (the tensors it was given,
// which Update points at their new values).
func (o *Optimizer) Params() []*Tensor { return o.params }

// Update takes one step: grads[i] is the gradient of parameter i (same
// mesh, shape and element type). Each parameter then refers to its
// updated shards, made on the procs from the old ones, which are freed:
// the *Tensor is the same, a leaf for the next step's Grad. Gradients
// are read as they are; average them across procs first for data
// parallelism. An error in a gradient's shards on a proc (a failed op)
// becomes the parameter's there, and FetchShard returns it.
func (o *Optimizer) Update(grads []*Tensor) error {
	if len(grads) != len(o.params) {
		return fmt.Errorf("dtensor: optimizer of %d parameters given %d gradients", len(o.params), len(grads))
	}
	for i, g := range grads {
		p := o.params[i]
		switch {
		case g == nil:
			return fmt.Errorf("dtensor: optimizer: gradient %d is nil", i)
		case g.err != nil:
			return g.err
		case g.mesh.procs != o.mesh.procs:
			return fmt.Errorf("%w: optimizer: gradient %d on %v, its parameter on another mesh, %v", ErrMesh, i, g.mesh.Extent(), o.mesh.Extent())
		case !g.shape.Eq(p.shape) || g.dtype != p.dtype:
			return fmt.Errorf("%w: optimizer: gradient %d of %s %v for a parameter of %s %v", ErrShape, i, g.dtype, g.shape, p.dtype, p.shape)
		}
	}
	for i, g := range grads {
		p := o.params[i]
		next, err := o.mesh.record(op{Kind: "optimize", Name: o.name, Hyper: o.hyper, Seed: o.id, Index: i}, []*Tensor{p, g}, nil)
		if err != nil {
			return err
		}
		*p = Tensor{mesh: p.mesh, id: next.id, shape: p.shape, dtype: p.dtype}
	}
	return nil
}

// Free lets go of the optimizer's state on the procs; an Update after it
// starts from none.
func (o *Optimizer) Free() error {
	_, err := o.mesh.record(op{Kind: "optfree", Seed: o.id}, nil, nil)
	return err
}

// Update is the optimizer's Update, unless the step has failed.
func (s *Step) Update(o *Optimizer, grads []*Tensor) {
	if s.err == nil {
		s.Fail(o.Update(grads))
	}
}

// optState is every optimizer's state on this proc, by optimizer and
// parameter: what the op "optimize" reads and writes, in the order the
// ops arrive.
var optState = struct {
	sync.Mutex
	m map[[2]uint64]*slot
}{m: map[[2]uint64]*slot{}}

// slot is the state of one parameter: SGD's velocity (a), or Adam's
// moments (a, b) and its step count.
type slot struct {
	a, b []float64
	t    int
}

// optimizeShape: the parameter's shape; its gradient's must be the same.
func optimizeShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) {
		return nil, misfit(o, in)
	}
	return in[0].Clone(), nil
}

// optimize is the op "optimize" on a proc: the parameter in[0] updated
// from its gradient in[1] and its state, as a new shard; the old one is
// dropped.
func optimize(_ context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
	want := map[string]int{"sgd": 2, "adam": 4}[o.Name]
	if want == 0 || len(o.Hyper) != want {
		return nil, fmt.Errorf("dtensor: optimizer %q with %d hyperparameters", o.Name, len(o.Hyper))
	}
	p, g := values(in[0]), values(in[1])
	out := make([]float64, len(p))
	key := [2]uint64{o.Seed, uint64(o.Index)}
	optState.Lock()
	st := optState.m[key]
	if st == nil || len(st.a) != len(p) {
		st = &slot{a: make([]float64, len(p)), b: make([]float64, len(p))}
		optState.m[key] = st
	}
	optState.Unlock()
	h := o.Hyper
	switch o.Name {
	case "sgd":
		lr, mu := h[0], h[1]
		for i := range p {
			st.a[i] = mu*st.a[i] + g[i]
			out[i] = p[i] - lr*st.a[i]
		}
	case "adam":
		lr, b1, b2, eps := h[0], h[1], h[2], h[3]
		st.t++
		c1, c2 := 1-math.Pow(b1, float64(st.t)), 1-math.Pow(b2, float64(st.t))
		for i := range p {
			st.a[i] = b1*st.a[i] + (1-b1)*g[i]
			st.b[i] = b2*st.b[i] + (1-b2)*g[i]*g[i]
			out[i] = p[i] - lr*(st.a[i]/c1)/(math.Sqrt(st.b[i]/c2)+eps)
		}
	}
	store.Lock()
	delete(store.m, o.In[0])
	store.Unlock()
	return withValues(in[0], in[0].Shape(), out), nil
}

// optFree is the op "optfree": the optimizer o.Seed's state goes.
func optFree(_ context.Context, o op, _ []*tensor.Dense) (*tensor.Dense, error) {
	optState.Lock()
	defer optState.Unlock()
	for k := range optState.m {
		if k[0] == o.Seed {
			delete(optState.m, k)
		}
	}
	return nil, nil
}
