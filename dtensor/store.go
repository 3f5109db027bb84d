package dtensor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
	"github.com/monarch-go/monarch/ibverbs"
	"gorgonia.org/tensor"
)

// Every proc keeps the shards of the tensors of its meshes, by tensor id:
// either the shard, the error that took its place, or the op that makes
// it when it is read (deferred.go).
var store = struct {
	sync.Mutex
	m       map[uint64]entry
	changed chan struct{} // made when a shard is awaited, closed at the next put
}{m: map[uint64]entry{}}

type entry struct {
	t   *tensor.Dense
	err string
	p   *pending
}

// shard is the shard of entry e of tensor id (ok: the store has one), or
// its error; a pending op runs here, once.
func (e entry) shard(id uint64, ok bool) (*tensor.Dense, error) {
	switch {
	case !ok:
		return nil, fmt.Errorf("dtensor: no tensor %d on this proc", id)
	case e.p != nil:
		return e.p.result(id)
	case e.err != "":
		return nil, fmt.Errorf("dtensor: tensor %d: %s", id, e.err)
	}
	return e.t, nil
}

func put(id uint64, t *tensor.Dense, err error) {
	e := entry{t: t}
	if err != nil {
		e = entry{err: err.Error()}
	}
	store.Lock()
	keepLocked(id, e)
	store.Unlock()
}

// keepLocked stores e as tensor id's and wakes those awaiting a shard.
// Called with the store locked.
func keepLocked(id uint64, e entry) {
	store.m[id] = e
	if store.changed != nil {
		close(store.changed)
		store.changed = nil
	}
}

// awaitTimeout bounds how long a shard passed to an actor may take to
// appear: the ops that make it run on the proc's system actor, which may
// be behind the actor that receives it.
const awaitTimeout = 60 * time.Second

// await is get for a shard that ops issued earlier will make.
func await(id uint64) (*tensor.Dense, error) {
	deadline := time.After(awaitTimeout)
	for {
		store.Lock()
		_, ok := store.m[id]
		if !ok && store.changed == nil {
			store.changed = make(chan struct{})
		}
		changed := store.changed
		store.Unlock()
		if ok {
			return get(id)
		}
		select {
		case <-changed:
		case <-deadline:
			return nil, fmt.Errorf("dtensor: tensor %d did not appear on this proc within %v", id, awaitTimeout)
		}
	}
}

func get(id uint64) (*tensor.Dense, error) {
	store.Lock()
	e, ok := store.m[id]
	store.Unlock()
	return e.shard(id, ok)
}

// op is one instruction for every proc (or one proc) of a mesh: the name
// of an op of the table (ops), the tensors it reads and makes, and its
// parameters (each op reads those it needs). It travels as the array of
// its fields, in this order (opwire.go).
type op struct {
	Kind   string
	Out    uint64 // 0: the op makes no tensor
	In     []uint64
	Shape  []int
	Seed   uint64 // rand: the seed; optimize, optfree: the optimizer; grad, gradfree: the graph
	Rank   int    // the rank of the proc it is sent to (rand, rref)
	Index  int    // row: which row
	Value  float64
	Name   string           // rref: the endpoint's name
	Mesh   []byte           // rref: the actor mesh, a msgpack value (in line on the wire)
	Dims   []string         // allreduce: over these dimensions
	Comm   *collective.Comm // allreduce, reducescatter: the procs' communicator, the first time (Name is the reduction)
	CommID string           // allreduce, reducescatter: the communicator's id
	Graph  []gradNode       // grad: the graph from the leaves to the loss, in order, the first time (Seed names it)
	Wrt    []int            // grad: with Graph, its nodes of every parameter of the same Grad (Index is one)
	Leaves []uint64         // grad: the tensors of the graph's leaves, in order
	Handle *ibverbs.Handle  // import: the source proc's shard
	DType  string           // rand, full, import, data: the element type ("" float64)
	Raw    []byte           // data: the shard's raw little-endian bytes
	Hyper  []float64        // optimize: the rule's hyperparameters (Name the rule, Seed the optimizer, Index the parameter)
	Defer  []op             // grad: the ops that make the graph's nodes, kept to run when read (Shape is the loss's)
}

// opFn runs an op on this proc.
var opFn = actorrt.Remote1("monarch_dtensor_op", runAndKeep)

// runAndKeep runs o and keeps its result. It never fails: a failure (an
// unknown op among them) is kept in place of the result, since ops are
// broadcast and nobody is there to receive an error.
func runAndKeep(ctx context.Context, o op) (actorrt.Void, error) {
	if len(o.Defer) > 0 {
		deferOps(o)
	}
	t, err := run(ctx, o)
	if o.Out != 0 {
		put(o.Out, t, err)
	}
	return actorrt.Void{}, nil
}

// run computes o's result shard on this proc. The op's shape rule is
// checked again here (the client checked it first), so that an op runs
// only on shards that fit it.
func run(ctx context.Context, o op) (*tensor.Dense, error) {
	k, err := lookup(o)
	if err != nil {
		return nil, err
	}
	if k.refs {
		return k.run(ctx, o, nil)
	}
	return compute(ctx, k, o, func(i int) (*tensor.Dense, error) { return get(o.In[i]) })
}

// compute runs o, of kind k, on the shards input gives for its inputs,
// once its shape rule has passed on them.
func compute(ctx context.Context, k opKind, o op, input func(i int) (*tensor.Dense, error)) (*tensor.Dense, error) {
	in := make([]*tensor.Dense, len(o.In))
	shapes := make([]tensor.Shape, len(o.In))
	for i := range o.In {
		var err error
		if in[i], err = input(i); err != nil {
			return nil, err
		}
		shapes[i] = in[i].Shape()
	}
	if _, err := k.shape(o, shapes); err != nil {
		return nil, err
	}
	return k.run(ctx, o, in)
}

// shardData is a shard as it travels to the client: its element type
// and raw little-endian bytes.
type shardData struct {
	Shape []int  `msgpack:"s"`
	DType string `msgpack:"dt"`
	Raw   []byte `msgpack:"d"`
}

var fetchFn = actorrt.Remote1("monarch_dtensor_fetch", func(ctx context.Context, id uint64) (shardData, error) {
	t, err := get(id)
	if err != nil {
		return shardData{}, err
	}
	dt, raw := rawOf(t)
	return shardData{Shape: t.Shape().Clone(), DType: dt, Raw: raw}, nil
})
