package dtensor

import (
	"context"
	"errors"

	"github.com/monarch-go/monarch/actorrt"
	"gorgonia.org/tensor"
)

// Step is a run of calls that keeps the first error, as bufio.Scanner
// does: its methods are the ops of Tensor (and Grad, Reduce, the
// constructors, an Optimizer's Update) returning a *Tensor alone, and
// Fetch, which waits. Once a call fails, every later one does nothing
// and Err is that first error. What they return then is never nil but a
// failed tensor (a slice of them as long as asked for: a gradient per
// parameter) whose every use returns that error: in a Step, in a (T,
// error) call, as an endpoint's Shard, at Fetch. A training step is
// written straight through and checked once, at its fetch:
//
//	var s dtensor.Step
//	h := s.Relu(s.Add(s.MatMul(x, w1), b1))     // b1 broadcasts over the rows
//	z := s.Add(s.MatMul(h, w2), b2)
//	loss := s.Mean(s.Mean(s.Sub(s.Softplus(z), s.Mul(y, z)), 0), 0)
//	grads := s.Grad(ctx, loss, w1, b1, w2, b2)
//	s.Update(opt, s.ReduceAll(ctx, grads, dtensor.Mean)) // averaged across the procs
//	l, err := s.Fetch(ctx, loss, point)          // the first error, or the procs'
//	s.DropAllBut(w1, b1, w2, b2)                 // this step's tensors but the parameters
//	if err != nil { ... }
//
// The tensors a Step makes are ordinary tensors: the (T, error) methods
// take them, and a Step takes tensors made anywhere. A Step is for one
// goroutine; the zero Step is ready to use.
type Step struct {
	err  error
	made []*Tensor // what it made, for DropAllBut
}

// Err is the first error of the step's calls, or nil.
func (s *Step) Err() error { return s.err }

// Fail records err as the step's error, if it has none yet (nil is
// ignored): a check of the caller's own fails the step like an op.
func (s *Step) Fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Take keeps the result of a call of the (T, error) kind, an endpoint's
// RRef say: t, or err as the step's error. The call has run already:
// after a failure its inputs are the step's failed tensors, whose error
// it returns, and the step keeps its first error. A nil t with a nil
// err fails the step too (DropAllBut would have nothing to free).
//
//	y := s.Take(forward.RRef(actors, x))
func (s *Step) Take(t *Tensor, err error) *Tensor {
	if t == nil && err == nil {
		err = errors.New("dtensor: Take of a nil tensor and no error")
	}
	return s.do(func() (*Tensor, error) { return t, err })
}

// do runs f unless the step has failed, and keeps what f makes or its
// error; a failed tensor once the step has failed.
func (s *Step) do(f func() (*Tensor, error)) *Tensor {
	return s.doAll(1, func() ([]*Tensor, error) {
		t, err := f()
		return []*Tensor{t}, err
	})[0]
}

// doAll is do for a call that makes n tensors: n failed ones once the
// step has failed, so that a caller may index or slice what it asked for.
func (s *Step) doAll(n int, f func() ([]*Tensor, error)) []*Tensor {
	if s.err == nil {
		ts, err := f()
		if err == nil {
			s.made = append(s.made, ts...)
			return ts
		}
		s.err = err
	}
	out := make([]*Tensor, n)
	for i := range out {
		out[i] = failed(s.err)
	}
	return out
}

// DropAllBut frees the shards of every tensor the step made but those
// of keep (the parameters, say; tensors sharing an id through Detach are
// kept too), in one op per mesh, and forgets them: a training loop's
// step calls it at its end, once the values it wants are fetched (or
// sent for). Tensors the step did not make are not its to drop. It
// fails the step if the ops cannot be sent.
func (s *Step) DropAllBut(keep ...*Tensor) {
	kept := map[uint64]bool{}
	for _, k := range keep {
		if k != nil {
			kept[k.id] = true
		}
	}
	byMesh := map[*Mesh][]*Tensor{}
	var order []*Mesh
	for _, t := range s.made {
		if kept[t.id] {
			continue
		}
		kept[t.id] = true // once
		if byMesh[t.mesh] == nil {
			order = append(order, t.mesh)
		}
		byMesh[t.mesh] = append(byMesh[t.mesh], t)
	}
	s.made = nil
	for _, m := range order {
		if _, err := m.record(op{Kind: "drop"}, byMesh[m], nil); err != nil {
			s.Fail(err)
		}
	}
}

// Rand is Mesh.Rand.
func (s *Step) Rand(m *Mesh, shape ...int) *Tensor {
	return s.do(func() (*Tensor, error) { return m.Rand(shape...) })
}

// Full is Mesh.Full.
func (s *Step) Full(m *Mesh, v float64, shape ...int) *Tensor {
	return s.do(func() (*Tensor, error) { return m.Full(v, shape...) })
}

// FromSlice is Mesh.FromSlice.
func (s *Step) FromSlice(m *Mesh, data any, shape ...int) *Tensor {
	return s.do(func() (*Tensor, error) { return m.FromSlice(data, shape...) })
}

// Scatter is Mesh.Scatter.
func (s *Step) Scatter(m *Mesh, dim string, data any, shape ...int) *Tensor {
	return s.do(func() (*Tensor, error) { return m.Scatter(dim, data, shape...) })
}

// MatMul is Tensor.MatMul.
func (s *Step) MatMul(a, b *Tensor) *Tensor {
	return s.do(func() (*Tensor, error) { return a.MatMul(b) })
}

// T is Tensor.T.
func (s *Step) T(a *Tensor) *Tensor { return s.do(a.T) }

// Add is Tensor.Add (broadcast).
func (s *Step) Add(a, b *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Add(b) }) }

// Sub is Tensor.Sub (broadcast).
func (s *Step) Sub(a, b *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Sub(b) }) }

// Mul is Tensor.Mul (broadcast).
func (s *Step) Mul(a, b *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Mul(b) }) }

// Div is Tensor.Div (broadcast).
func (s *Step) Div(a, b *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Div(b) }) }

// Scale is Tensor.Scale.
func (s *Step) Scale(a *Tensor, v float64) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Scale(v) })
}

// AddScalar is Tensor.AddScalar.
func (s *Step) AddScalar(a *Tensor, v float64) *Tensor {
	return s.do(func() (*Tensor, error) { return a.AddScalar(v) })
}

// Exp is Tensor.Exp.
func (s *Step) Exp(a *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Exp() }) }

// Log is Tensor.Log.
func (s *Step) Log(a *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Log() }) }

// Sigmoid is Tensor.Sigmoid.
func (s *Step) Sigmoid(a *Tensor) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Sigmoid() })
}

// Tanh is Tensor.Tanh.
func (s *Step) Tanh(a *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Tanh() }) }

// Softplus is Tensor.Softplus.
func (s *Step) Softplus(a *Tensor) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Softplus() })
}

// Relu is Tensor.Relu.
func (s *Step) Relu(a *Tensor) *Tensor { return s.do(func() (*Tensor, error) { return a.Relu() }) }

// Softmax is Tensor.Softmax.
func (s *Step) Softmax(a *Tensor) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Softmax() })
}

// Sum is Tensor.Sum.
func (s *Step) Sum(a *Tensor, axis int) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Sum(axis) })
}

// Mean is Tensor.Mean.
func (s *Step) Mean(a *Tensor, axis int) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Mean(axis) })
}

// Reshape is Tensor.Reshape.
func (s *Step) Reshape(a *Tensor, shape ...int) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Reshape(shape...) })
}

// Row is Tensor.Row.
func (s *Step) Row(a *Tensor, i int) *Tensor {
	return s.do(func() (*Tensor, error) { return a.Row(i) })
}

// Reduce is the package's Reduce.
func (s *Step) Reduce(ctx context.Context, t *Tensor, dims []string, reduction string) *Tensor {
	return s.do(func() (*Tensor, error) { return Reduce(ctx, t, dims, reduction) })
}

// ReduceAll is ReduceEach of ts over every dimension of their mesh (data
// parallelism: ReduceAll(ctx, grads, Mean), one collective for all the
// gradients): a result for each of ts, failed ones once the step has
// failed.
func (s *Step) ReduceAll(ctx context.Context, ts []*Tensor, reduction string) []*Tensor {
	return s.doAll(len(ts), func() ([]*Tensor, error) { return ReduceEach(ctx, ts, nil, reduction) })
}

// Grad is the package's Grad: a gradient for each of params, failed ones
// once the step has failed.
func (s *Step) Grad(ctx context.Context, loss *Tensor, params ...*Tensor) []*Tensor {
	return s.doAll(len(params), func() ([]*Tensor, error) { return Grad(ctx, loss, params...) })
}

// Fetch is FetchShard: the shard, or the step's first error (which a
// failure on the procs before the shard, an endpoint's error say,
// becomes). It waits for the ops before it on that proc.
func (s *Step) Fetch(ctx context.Context, t *Tensor, p actorrt.Point) (*tensor.Dense, error) {
	d, err := s.FetchLater(t, p).Get(ctx)
	s.Fail(err)
	return d, err
}

// FetchLater is FetchShardLater; once the step has failed, a future
// whose Get is the step's error. Its Get is where a failure on the procs
// shows.
func (s *Step) FetchLater(t *Tensor, p actorrt.Point) *ShardFuture {
	if s.err != nil {
		return &ShardFuture{err: s.err}
	}
	return FetchShardLater(t, p)
}
