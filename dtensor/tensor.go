package dtensor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
	"gorgonia.org/tensor"
)

// ErrShape: operands whose shapes do not fit the op.
var ErrShape = errors.New("dtensor: shapes do not fit")

// Mesh is a proc mesh activated for distributed tensors.
type Mesh struct {
	procs *actorrt.ProcMesh

	commMu   sync.Mutex
	c        *collective.Comm // made at the first collective (Reduce)
	commSent bool             // an op that carries c was queued (reduce.go)

	// The outbox (outbox.go): ops kept to go together, their data's
	// bytes, the timer that sends them, and the error of a batch that
	// could not be sent, for the next op or wait.
	outMu    sync.Mutex
	out      []op
	outBytes int
	timer    *time.Timer
	outErr   error

	// The graphs Grad sent the procs (gradcache.go): their ids by
	// structure, oldest first in graphOrder.
	gradMu     sync.Mutex
	graphs     map[string]uint64
	graphOrder []string
}

// Activate makes procs hold distributed tensors: tensors created on the
// Mesh have one shard on each of its procs.
func Activate(procs *actorrt.ProcMesh) *Mesh { return &Mesh{procs: procs} }

// Extent is the shape of the mesh: one shard per point.
func (m *Mesh) Extent() actorrt.Extent { return m.procs.Extent() }

// Tensor is a distributed tensor: a shard of the same shape on every proc
// of its mesh. It is a reference: ops on it run where the shards are. A
// Step that has failed returns failed tensors: no mesh, no shape, and
// the step's error at every use.
type Tensor struct {
	mesh  *Mesh
	id    uint64
	shape tensor.Shape // of every shard
	dtype string       // Float64 or Float32
	// The op that made it and its inputs, for Grad: what to differentiate
	// through.
	src op
	ins []*Tensor
	// err, if not nil, makes it a result a failed Step could not make
	// (failed): every use of it returns err.
	err error
}

// failed is the tensor a Step returns once it has failed: no mesh, no
// shards, and err at every use.
func failed(err error) *Tensor { return &Tensor{err: err} }

// usable is nil if t can be an input of the op kind: not nil, and not a
// failed step's (whose error it is).
func (t *Tensor) usable(kind string) error {
	switch {
	case t == nil:
		return fmt.Errorf("dtensor: %s of a nil tensor", kind)
	case t.err != nil:
		return t.err
	}
	return nil
}

// ids are unique per client process; the client's job is the namespace.
var nextID atomic.Uint64

func newID() uint64 { return uint64(time.Now().UnixNano())<<16 ^ nextID.Add(1) }

// Detach is t without the ops that made it: the same shards, a leaf for
// Grad, and nothing of its history kept alive (a training loop that
// updates its parameters with ops, w = w - lr*g, should detach them each
// step).
func (t *Tensor) Detach() *Tensor {
	return &Tensor{mesh: t.mesh, id: t.id, shape: t.shape, dtype: t.dtype, err: t.err}
}

// DType is the element type of the shards: Float64 or Float32.
func (t *Tensor) DType() string { return t.dtype }

// Shape is the shape of each shard.
func (t *Tensor) Shape() tensor.Shape { return t.shape.Clone() }

// Mesh is the mesh the shards live on.
func (t *Tensor) Mesh() *Mesh { return t.mesh }

// String names the tensor by its shard shape and its mesh's extent (a
// failed step's by its error).
func (t *Tensor) String() string {
	if t.err != nil {
		return fmt.Sprintf("DTensor(failed: %v)", t.err)
	}
	return fmt.Sprintf("DTensor(shard %v on %v)", t.shape, t.mesh.Extent())
}

// record issues op o on the tensors in, on every proc of m, and returns
// the tensor it makes (nil for an op that makes none). The op's shape
// rule runs here first: shapes that do not fit fail at the call, with the
// op and the shapes named, and nothing is sent. each, if not nil, sets
// what differs from proc to proc (its rank, its data) before o goes to
// that proc alone; otherwise one o goes to all of them.
func (m *Mesh) record(o op, in []*Tensor, each func(rank int, o *op)) (*Tensor, error) {
	shapes := make([]tensor.Shape, len(in))
	o.In = make([]uint64, len(in))
	dtype := o.DType
	if dtype == "" {
		dtype = Float64
	}
	if len(in) > 0 && in[0] != nil && o.Kind != "grad" {
		dtype = in[0].dtype
	}
	k, err := lookup(o)
	if err != nil {
		return nil, err
	}
	for i, u := range in {
		if err := u.usable(o.Kind); err != nil {
			return nil, err
		}
		if u.dtype != in[0].dtype && !k.refs {
			return nil, fmt.Errorf("%w: %s of %s and %s tensors", ErrShape, o.Kind, in[0].dtype, u.dtype)
		}
		if u.mesh.procs != m.procs && !u.mesh.Extent().Equal(m.Extent()) {
			return nil, fmt.Errorf("%w: tensors on different meshes (%v, %v)", ErrShape, m.Extent(), u.mesh.Extent())
		}
		shapes[i], o.In[i] = u.shape, u.id
	}
	shape, err := k.shape(o, shapes)
	if err != nil {
		return nil, err
	}
	var out *Tensor
	if shape != nil {
		out = &Tensor{mesh: m, id: newID(), shape: shape, dtype: dtype}
		if _, ok := differentiable[o.Kind]; ok {
			// Only what Grad can differentiate through is kept: the rest
			// are leaves, and their history would only take room.
			out.src, out.ins = o, in
		}
		o.Out = out.id
	}
	if each == nil {
		if err := m.queue(o); err != nil {
			return nil, err
		}
		return out, nil
	}
	if err := m.flush(); err != nil { // what was recorded before goes first
		return nil, err
	}
	for r, p := range m.Extent().Points() {
		each(r, &o)
		if err := opFn.Broadcast(m.procs.SliceAt(p), o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// withRank sends each proc its rank.
func withRank(r int, o *op) { o.Rank = r }

// apply records o on t and more, on t's mesh, for every proc alike.
func (t *Tensor) apply(o op, more ...*Tensor) (*Tensor, error) {
	if err := t.usable(o.Kind); err != nil {
		return nil, err
	}
	return t.mesh.record(o, append([]*Tensor{t}, more...), nil)
}

// Rand is a tensor of uniform [0, 1) values, different on every proc
// (seeded by its rank).
func (m *Mesh) Rand(shape ...int) (*Tensor, error) {
	return m.record(op{Kind: "rand", Shape: shape, Seed: newID()}, nil, withRank)
}

// RandOf is Rand with elements of dtype (Float64 or Float32).
func (m *Mesh) RandOf(dtype string, shape ...int) (*Tensor, error) {
	if err := checkDType(dtype); err != nil {
		return nil, err
	}
	return m.record(op{Kind: "rand", Shape: shape, Seed: newID(), DType: dtype}, nil, withRank)
}

// FullOf is Full with elements of dtype.
func (m *Mesh) FullOf(dtype string, v float64, shape ...int) (*Tensor, error) {
	if err := checkDType(dtype); err != nil {
		return nil, err
	}
	return m.record(op{Kind: "full", Shape: shape, Value: v, DType: dtype}, nil, nil)
}

func checkDType(dtype string) error {
	if dtype != Float64 && dtype != Float32 {
		return fmt.Errorf("dtensor: element type %q (float64 or float32)", dtype)
	}
	return nil
}

// Full is a tensor of v everywhere.
func (m *Mesh) Full(v float64, shape ...int) (*Tensor, error) {
	return m.record(op{Kind: "full", Shape: shape, Value: v}, nil, nil)
}

// Zeros is Full(0, ...).
func (m *Mesh) Zeros(shape ...int) (*Tensor, error) { return m.Full(0, shape...) }

// MatMul is the matrix product of each proc's shards: t (n x k) times u
// (k x m).
func (t *Tensor) MatMul(u *Tensor) (*Tensor, error) { return t.apply(op{Kind: "matmul"}, u) }

// T is the transpose of a matrix.
func (t *Tensor) T() (*Tensor, error) { return t.apply(op{Kind: "transpose"}) }

// Add is the elementwise sum.
func (t *Tensor) Add(u *Tensor) (*Tensor, error) { return t.apply(op{Kind: "add"}, u) }

// Mul is the elementwise product.
func (t *Tensor) Mul(u *Tensor) (*Tensor, error) { return t.apply(op{Kind: "mul"}, u) }

// Scale multiplies every element by v.
func (t *Tensor) Scale(v float64) (*Tensor, error) { return t.apply(op{Kind: "scale", Value: v}) }

// Sub is the elementwise difference.
func (t *Tensor) Sub(u *Tensor) (*Tensor, error) { return t.apply(op{Kind: "sub"}, u) }

// Div is the elementwise quotient.
func (t *Tensor) Div(u *Tensor) (*Tensor, error) { return t.apply(op{Kind: "div"}, u) }

// AddScalar adds v to every element.
func (t *Tensor) AddScalar(v float64) (*Tensor, error) { return t.apply(op{Kind: "shift", Value: v}) }

// Exp is e^x elementwise.
func (t *Tensor) Exp() (*Tensor, error) { return t.apply(op{Kind: "unary", Name: "exp"}) }

// Log is the natural logarithm elementwise.
func (t *Tensor) Log() (*Tensor, error) { return t.apply(op{Kind: "unary", Name: "log"}) }

// Sigmoid is 1/(1 + e^-x) elementwise.
func (t *Tensor) Sigmoid() (*Tensor, error) { return t.apply(op{Kind: "unary", Name: "sigmoid"}) }

// Tanh is the hyperbolic tangent elementwise.
func (t *Tensor) Tanh() (*Tensor, error) { return t.apply(op{Kind: "unary", Name: "tanh"}) }

// Softplus is log(1 + exp(x)) elementwise.
func (t *Tensor) Softplus() (*Tensor, error) { return t.apply(op{Kind: "unary", Name: "softplus"}) }

// Softmax is the softmax over the last axis.
func (t *Tensor) Softmax() (*Tensor, error) { return t.apply(op{Kind: "softmax"}) }

// Sum sums each shard over an axis, which the result drops (a vector
// becomes a one-element vector).
func (t *Tensor) Sum(axis int) (*Tensor, error) { return t.apply(op{Kind: "sum", Index: axis}) }

// Mean is the mean of each shard over an axis, which the result drops,
// as Sum.
func (t *Tensor) Mean(axis int) (*Tensor, error) {
	return t.apply(op{Kind: "sum", Index: axis, Value: 1})
}

// Reshape gives each shard a new shape of as many elements.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	return t.apply(op{Kind: "reshape", Shape: shape})
}

// Relu is max(x, 0) elementwise.
func (t *Tensor) Relu() (*Tensor, error) { return t.apply(op{Kind: "relu"}) }

// Row is row i of each shard (dist_compute[0]).
func (t *Tensor) Row(i int) (*Tensor, error) { return t.apply(op{Kind: "row", Index: i}) }

// Drop frees the tensor's shards.
func (t *Tensor) Drop() error {
	_, err := t.apply(op{Kind: "drop"})
	return err
}

// FetchShard copies the shard at point p of the tensor's mesh here.
func FetchShard(ctx context.Context, t *Tensor, p actorrt.Point) (*tensor.Dense, error) {
	return FetchShardLater(t, p).Get(ctx)
}

// ShardFuture is a shard on its way here (FetchShardLater).
type ShardFuture struct {
	f   *actorrt.Future[actorrt.ValueMesh[shardData]]
	err error
}

// FetchShardLater is FetchShard without the wait: the ops recorded
// before it go to the procs now, and so does the request for the shard
// at point p, which Get waits for. A training loop that fetches each
// step's loss this way, and records the next step before it waits, keeps
// the procs at work while it records.
func FetchShardLater(t *Tensor, p actorrt.Point) *ShardFuture {
	if err := t.usable("fetch"); err != nil {
		return &ShardFuture{err: err}
	}
	one := t.mesh.procs.SliceAt(p)
	if err := one.Err(); err != nil {
		return &ShardFuture{err: err}
	}
	if err := t.mesh.flush(); err != nil {
		return &ShardFuture{err: err}
	}
	return &ShardFuture{f: fetchFn.Call(one, t.id)}
}

// Get waits for the shard, as long as ctx lets it.
func (f *ShardFuture) Get(ctx context.Context) (*tensor.Dense, error) {
	if f.err != nil {
		return nil, f.err
	}
	v, err := f.f.Get(ctx)
	if err != nil {
		return nil, err
	}
	d := v.Values()[0]
	return denseOf(d.DType, d.Shape, d.Raw)
}
