package dtensor

import (
	"context"
	"fmt"
	"sync"

	"github.com/monarch-go/monarch/collective"
	"gorgonia.org/tensor"
)

// Reductions across shards, for Reduce and ReduceScatter.
const (
	Sum  = "sum"  // the elementwise sum
	Mean = "mean" // the elementwise mean
	Max  = "max"  // the elementwise maximum
	Min  = "min"  // the elementwise minimum
)

var reductions = map[string]collective.Op{Sum: collective.Sum, Mean: collective.Mean, Max: collective.Max, Min: collective.Min}

// Reduce combines the shards along dims of the mesh (all of them if dims
// is empty) with reduction (Sum, Mean, Max or Min), elementwise: every
// proc of a group (the procs that differ only along dims) ends up with the
// group's result, as a new tensor (an all-reduce). It runs on the procs,
// as collectives (package collective), one dimension after the other: the
// shards move proc to proc, not through this process, and the result
// stays where it is (FetchShard it if it is wanted here).
func Reduce(ctx context.Context, t *Tensor, dims []string, reduction string) (*Tensor, error) {
	if err := t.usable("allreduce"); err != nil {
		return nil, err
	}
	if _, ok := reductions[reduction]; !ok {
		return nil, fmt.Errorf("dtensor: reduce op %q: want sum, mean, max or min", reduction)
	}
	ext := t.mesh.Extent()
	if len(dims) == 0 {
		dims = ext.Names()
	}
	for _, d := range dims {
		if _, ok := ext.Size(d); !ok {
			return nil, fmt.Errorf("%w: no dimension %q in %v", ErrShape, d, ext)
		}
	}
	return t.collectiveOp(ctx, op{Kind: "allreduce", Name: reduction, Dims: dims})
}

// ReduceScatter combines the shards along dim with reduction, as Reduce
// does, and leaves each proc the part of the result for its index along
// dim: the index-th of size equal slices of the first axis, which the
// size of dim must divide. It runs on the procs, as a collective.
func ReduceScatter(ctx context.Context, t *Tensor, dim string, reduction string) (*Tensor, error) {
	if err := t.usable("reducescatter"); err != nil {
		return nil, err
	}
	if _, ok := reductions[reduction]; !ok {
		return nil, fmt.Errorf("dtensor: reduce op %q: want sum, mean, max or min", reduction)
	}
	if _, ok := t.mesh.Extent().Size(dim); !ok {
		return nil, fmt.Errorf("%w: no dimension %q in %v", ErrShape, dim, t.mesh.Extent())
	}
	return t.collectiveOp(ctx, op{Kind: "reducescatter", Name: reduction, Dims: []string{dim}, Index: t.mesh.size(dim)})
}

// size is the size of dim of the mesh (0 if it has none).
func (m *Mesh) size(dim string) int {
	n, _ := m.Extent().Size(dim)
	return n
}

// scatterShape: the first axis divided by the group's size (o.Index).
func scatterShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	s := in[0]
	if len(s) == 0 || o.Index <= 0 || s[0]%o.Index != 0 {
		return nil, fmt.Errorf("%w: reducescatter of %v over %d procs (the first axis must divide)", ErrShape, s, o.Index)
	}
	out := s.Clone()
	out[0] /= o.Index
	return out, nil
}

// reduceScatter is the op "reducescatter" on a proc.
func reduceScatter(ctx context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
	comm, err := commOf(o)
	if err != nil {
		return nil, err
	}
	c := in[0].Materialize().(*tensor.Dense).Clone().(*tensor.Dense)
	shape, err := scatterShape(o, []tensor.Shape{c.Shape()})
	if err != nil {
		return nil, err
	}
	var backing any
	if c.Dtype() == tensor.Float32 {
		backing, err = collective.ReduceScatter(ctx, comm, o.Dims[0], c.Float32s(), reductions[o.Name])
	} else {
		backing, err = collective.ReduceScatter(ctx, comm, o.Dims[0], c.Float64s(), reductions[o.Name])
	}
	if err != nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), nil
}

// collectiveOp records o, a collective among the procs of t's mesh, on
// t. The mesh's communicator is made at its first collective; o names it
// by its id (op.CommID), and carries it (op.Comm) until an op that does
// is queued: each proc keeps it from that op on (comms), and the ops
// after it need not carry it again.
func (t *Tensor) collectiveOp(ctx context.Context, o op) (*Tensor, error) {
	if err := t.usable(o.Kind); err != nil {
		return nil, err
	}
	m := t.mesh
	m.commMu.Lock()
	defer m.commMu.Unlock()
	if m.c == nil {
		c, err := collective.New(ctx, m.procs)
		if err != nil {
			return nil, err
		}
		m.c = c
	}
	o.CommID = m.c.ID
	if !m.commSent {
		o.Comm = m.c
	}
	out, err := t.apply(o)
	if err == nil {
		m.commSent = true
	}
	return out, err
}

// comms are the communicators the collective ops on this proc carried,
// by id.
var comms sync.Map

// commOf is the communicator of o, a collective op on this proc: the one
// it carries (kept for the ops after it), or the one it names.
func commOf(o op) (*collective.Comm, error) {
	if o.Comm != nil {
		comms.Store(o.Comm.ID, o.Comm)
		return o.Comm, nil
	}
	if c, ok := comms.Load(o.CommID); ok {
		return c.(*collective.Comm), nil
	}
	if o.CommID == "" {
		return nil, fmt.Errorf("dtensor: %s without a communicator", o.Kind)
	}
	return nil, fmt.Errorf("dtensor: %s: communicator %s is not known on this proc (the op that carried it did not arrive)", o.Kind, o.CommID)
}

// allReduce is the op "allreduce" on a proc: its shard all-reduced with
// the others of its group, along each of o.Dims in turn.
func allReduce(ctx context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
	comm, err := commOf(o)
	if err != nil {
		return nil, err
	}
	c := in[0].Materialize().(*tensor.Dense).Clone().(*tensor.Dense)
	for _, d := range o.Dims {
		var err error
		if c.Dtype() == tensor.Float32 {
			err = collective.AllReduce(ctx, comm, d, c.Float32s(), reductions[o.Name])
		} else {
			err = collective.AllReduce(ctx, comm, d, c.Float64s(), reductions[o.Name])
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}
