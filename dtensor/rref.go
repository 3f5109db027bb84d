package dtensor

import (
	"context"
	"fmt"
	"sync"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/vmihailenco/msgpack/v5"
	"gorgonia.org/tensor"
)

// RRef endpoints: an actor endpoint that maps a shard to a shard, run by
// every actor of a mesh on its own proc's shard, its results kept where
// they are as a new distributed tensor. The propagate function gives the
// result's shape from the input's, so the new tensor can be used at once,
// without waiting for the actors.

// RRefEndpoint is an endpoint registered with Endpoint.
type RRefEndpoint[A any] struct {
	name string
	err  error
}

// rrefRunner calls a registered endpoint, on the proc, for one actor.
type rrefRunner func(ctx context.Context, mesh []byte, rank int, in *tensor.Dense) (*tensor.Dense, error)

// rrefs holds the registered endpoints by name: how to run each (m) and
// the shape of its results (shapes, its propagate function).
var rrefs = struct {
	sync.RWMutex
	m      map[string]rrefRunner
	shapes map[string]func(tensor.Shape) tensor.Shape
}{m: map[string]rrefRunner{}, shapes: map[string]func(tensor.Shape) tensor.Shape{}}

// Endpoint registers ep (an endpoint of actor type A) for RRef under name,
// in every process: declare it as a package-level var.
func Endpoint[A any](name string, ep func(*A, *actorrt.Context, Shard) (Shard, error), propagate func(tensor.Shape) tensor.Shape) *RRefEndpoint[A] {
	e := &RRefEndpoint[A]{name: name}
	rrefs.Lock()
	defer rrefs.Unlock()
	if rrefs.m[name] != nil {
		e.err = fmt.Errorf("dtensor: endpoint %q registered twice", name)
		return e
	}
	rrefs.shapes[name] = propagate
	rrefs.m[name] = func(ctx context.Context, raw []byte, rank int, in *tensor.Dense) (*tensor.Dense, error) {
		var m *actorrt.ActorMesh[A]
		if err := actorrt.Unmarshal(ctx, raw, &m); err != nil {
			return nil, err
		}
		p, err := m.Extent().Point(rank)
		if err != nil {
			return nil, err
		}
		out, err := actorrt.Method1(ep).CallOne(m.SliceAt(p), NewShard(in)).Get(ctx)
		if err != nil {
			return nil, err
		}
		return out.T, nil
	}
	return e
}

// RRef runs the endpoint on every actor of m with its proc's shard of t,
// and returns the results as a new tensor on t's mesh. m must be spawned
// on t's procs (the same extent).
func (e *RRefEndpoint[A]) RRef(m *actorrt.ActorMesh[A], t *Tensor) (*Tensor, error) {
	if e.err != nil {
		return nil, e.err
	}
	if err := t.usable("rref"); err != nil {
		return nil, err
	}
	if !m.Extent().Equal(t.mesh.Extent()) {
		return nil, fmt.Errorf("%w: actors of extent %v for a tensor on %v", ErrShape, m.Extent(), t.mesh.Extent())
	}
	raw, err := msgpack.Marshal(m)
	if err != nil {
		return nil, err
	}
	return t.mesh.record(op{Kind: "rref", Name: e.name, Mesh: raw}, []*Tensor{t}, withRank)
}

// registered is the endpoint registered under name: its runner and its
// propagate function.
func registered(name string) (rrefRunner, func(tensor.Shape) tensor.Shape, error) {
	rrefs.RLock()
	defer rrefs.RUnlock()
	run, propagate := rrefs.m[name], rrefs.shapes[name]
	switch {
	case run == nil:
		return nil, nil, fmt.Errorf("dtensor: no endpoint %q in this program (register it with dtensor.Endpoint in a package-level var)", name)
	case propagate == nil:
		return nil, nil, fmt.Errorf("dtensor: endpoint %q has no propagate function", name)
	}
	return run, propagate, nil
}

// rrefShape is the shape rule of the "rref" op: the endpoint's propagate
// function gives its results' shape.
func rrefShape(o op, in []tensor.Shape) (tensor.Shape, error) {
	_, propagate, err := registered(o.Name)
	if err != nil {
		return nil, err
	}
	return propagate(in[0].Clone()), nil
}

// runRRef runs the "rref" op on a proc: it calls the actor at this rank
// with this proc's shard, and its result is the op's.
func runRRef(ctx context.Context, o op, in []*tensor.Dense) (*tensor.Dense, error) {
	run, _, err := registered(o.Name)
	if err != nil {
		return nil, err
	}
	return run(ctx, o.Mesh, o.Rank, in[0])
}
