package dtensor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"gorgonia.org/tensor"
)

// ErrShape: operands whose shapes do not fit the op.
var ErrShape = errors.New("dtensor: shapes do not fit")

// Mesh is a proc mesh activated for distributed tensors.
type Mesh struct {
	procs *actorrt.ProcMesh
}

// Activate makes procs hold distributed tensors: tensors created on the
// Mesh have one shard on each of its procs.
func Activate(procs *actorrt.ProcMesh) *Mesh { return &Mesh{procs: procs} }

// Extent is the shape of the mesh: one shard per point.
func (m *Mesh) Extent() actorrt.Extent { return m.procs.Extent() }

// Tensor is a distributed tensor: a shard of the same shape on every proc
// of its mesh. It is a reference: ops on it run where the shards are.
type Tensor struct {
	mesh  *Mesh
	id    uint64
	shape tensor.Shape // of every shard
}

// ids are unique per client process; the client's job is the namespace.
var nextID atomic.Uint64

func newID() uint64 { return uint64(time.Now().UnixNano())<<16 ^ nextID.Add(1) }

// Shape is the shape of each shard.
func (t *Tensor) Shape() tensor.Shape { return t.shape.Clone() }

// Mesh is the mesh the shards live on.
func (t *Tensor) Mesh() *Mesh { return t.mesh }

func (t *Tensor) String() string {
	return fmt.Sprintf("DTensor(shard %v on %v)", t.shape, t.mesh.Extent())
}

// broadcast sends o to every proc of the mesh.
func (m *Mesh) broadcast(o op) error { return opFn.Broadcast(m.procs, o) }

// create makes a tensor whose shard on each proc depends on its rank.
func (m *Mesh) create(kind string, shape []int, v float64) (*Tensor, error) {
	if len(shape) == 0 || product(shape) <= 0 {
		return nil, fmt.Errorf("%w: shape %v", ErrShape, shape)
	}
	t := &Tensor{mesh: m, id: newID(), shape: tensor.Shape(shape).Clone()}
	seed := newID()
	for r, p := range m.Extent().Points() {
		o := op{Kind: kind, Out: t.id, Shape: shape, Seed: seed, Rank: r, Value: v}
		if err := opFn.Broadcast(m.procs.SliceAt(p), o); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Rand is a tensor of uniform [0, 1) values, different on every proc
// (seeded by its rank).
func (m *Mesh) Rand(shape ...int) (*Tensor, error) { return m.create("rand", shape, 0) }

// Full is a tensor of v everywhere.
func (m *Mesh) Full(v float64, shape ...int) (*Tensor, error) { return m.create("full", shape, v) }

// Zeros is Full(0, ...).
func (m *Mesh) Zeros(shape ...int) (*Tensor, error) { return m.create("full", shape, 0) }

func (t *Tensor) derive(kind string, shape tensor.Shape, v float64, row int, in ...*Tensor) (*Tensor, error) {
	ids := []uint64{t.id}
	for _, u := range in {
		if u.mesh.procs != t.mesh.procs && !u.mesh.Extent().Equal(t.mesh.Extent()) {
			return nil, fmt.Errorf("%w: tensors on different meshes (%v, %v)", ErrShape, t.mesh.Extent(), u.mesh.Extent())
		}
		ids = append(ids, u.id)
	}
	out := &Tensor{mesh: t.mesh, id: newID(), shape: shape}
	return out, t.mesh.broadcast(op{Kind: kind, Out: out.id, In: ids, Value: v, Rank: row})
}

// MatMul is the matrix product of each proc's shards: t (n x k) times u
// (k x m).
func (t *Tensor) MatMul(u *Tensor) (*Tensor, error) {
	if len(t.shape) != 2 || len(u.shape) != 2 || t.shape[1] != u.shape[0] {
		return nil, fmt.Errorf("%w: matmul of %v and %v", ErrShape, t.shape, u.shape)
	}
	return t.derive("matmul", tensor.Shape{t.shape[0], u.shape[1]}, 0, 0, u)
}

// T is the transpose of a matrix.
func (t *Tensor) T() (*Tensor, error) {
	if len(t.shape) != 2 {
		return nil, fmt.Errorf("%w: transpose of %v", ErrShape, t.shape)
	}
	return t.derive("transpose", tensor.Shape{t.shape[1], t.shape[0]}, 0, 0)
}

// Add is the elementwise sum.
func (t *Tensor) Add(u *Tensor) (*Tensor, error) {
	if !t.shape.Eq(u.shape) {
		return nil, fmt.Errorf("%w: add of %v and %v", ErrShape, t.shape, u.shape)
	}
	return t.derive("add", t.shape.Clone(), 0, 0, u)
}

// Mul is the elementwise product.
func (t *Tensor) Mul(u *Tensor) (*Tensor, error) {
	if !t.shape.Eq(u.shape) {
		return nil, fmt.Errorf("%w: mul of %v and %v", ErrShape, t.shape, u.shape)
	}
	return t.derive("mul", t.shape.Clone(), 0, 0, u)
}

// Scale multiplies every element by v.
func (t *Tensor) Scale(v float64) (*Tensor, error) { return t.derive("scale", t.shape.Clone(), v, 0) }

// Relu is max(x, 0) elementwise.
func (t *Tensor) Relu() (*Tensor, error) { return t.derive("relu", t.shape.Clone(), 0, 0) }

// Row is row i of each shard (dist_compute[0]).
func (t *Tensor) Row(i int) (*Tensor, error) {
	if len(t.shape) < 2 || i < 0 || i >= t.shape[0] {
		return nil, fmt.Errorf("%w: row %d of %v", ErrShape, i, t.shape)
	}
	return t.derive("row", t.shape[1:].Clone(), 0, i)
}

// Drop frees the tensor's shards.
func (t *Tensor) Drop() error {
	return t.mesh.broadcast(op{Kind: "drop", In: []uint64{t.id}})
}

// FetchShard copies the shard at point p of the tensor's mesh here.
func FetchShard(ctx context.Context, t *Tensor, p actorrt.Point) (*tensor.Dense, error) {
	one := t.mesh.procs.SliceAt(p)
	if err := one.Err(); err != nil {
		return nil, err
	}
	v, err := fetchFn.Call(one, t.id).Get(ctx)
	if err != nil {
		return nil, err
	}
	d := v.Values()[0]
	return tensor.New(tensor.WithShape(d.Shape...), tensor.WithBacking(d.Data)), nil
}
