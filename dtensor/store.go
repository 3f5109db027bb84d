package dtensor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"gorgonia.org/tensor"
)

// Every proc keeps the shards of the tensors of its meshes, by tensor id:
// either the shard or the error that took its place.
var store = struct {
	sync.Mutex
	m       map[uint64]entry
	changed chan struct{} // closed and replaced at every put
}{m: map[uint64]entry{}, changed: make(chan struct{})}

type entry struct {
	t   *tensor.Dense
	err string
}

func put(id uint64, t *tensor.Dense, err error) {
	e := entry{t: t}
	if err != nil {
		e = entry{err: err.Error()}
	}
	store.Lock()
	store.m[id] = e
	close(store.changed)
	store.changed = make(chan struct{})
	store.Unlock()
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
	switch {
	case !ok:
		return nil, fmt.Errorf("dtensor: no tensor %d on this proc", id)
	case e.err != "":
		return nil, fmt.Errorf("dtensor: tensor %d: %s", id, e.err)
	}
	return e.t, nil
}

// op is one instruction for every proc (or one proc) of a mesh.
type op struct {
	Kind  string    `msgpack:"k"`
	Out   uint64    `msgpack:"o"`
	In    []uint64  `msgpack:"i"`
	Shape []int     `msgpack:"s"`
	Seed  uint64    `msgpack:"seed"`
	Rank  int       `msgpack:"r"`
	Value float64   `msgpack:"v"`
	Data  []float64 `msgpack:"d"`
	Name  string    `msgpack:"n"` // RRef: the endpoint's name
	Mesh  []byte    `msgpack:"m"` // RRef: the actor mesh, encoded
}

// opFn runs an op on this proc. It never fails: a failure is stored as the
// op's result (ops are broadcast, and nobody is there to receive an error).
var opFn = actorrt.Remote1("monarch_dtensor_op", func(ctx context.Context, o op) (actorrt.Void, error) {
	t, err := run(ctx, o)
	if o.Out != 0 {
		put(o.Out, t, err)
	}
	return actorrt.Void{}, nil
})

func run(ctx context.Context, o op) (*tensor.Dense, error) {
	in := make([]*tensor.Dense, len(o.In))
	for i, id := range o.In {
		t, err := get(id)
		if err != nil {
			return nil, err
		}
		in[i] = t
	}
	switch o.Kind {
	case "rand":
		r := rand.New(rand.NewPCG(o.Seed, uint64(o.Rank)))
		data := make([]float64, product(o.Shape))
		for i := range data {
			data[i] = r.Float64()
		}
		return tensor.New(tensor.WithShape(o.Shape...), tensor.WithBacking(data)), nil
	case "full":
		data := make([]float64, product(o.Shape))
		for i := range data {
			data[i] = o.Value
		}
		return tensor.New(tensor.WithShape(o.Shape...), tensor.WithBacking(data)), nil
	case "put":
		return tensor.New(tensor.WithShape(o.Shape...), tensor.WithBacking(o.Data)), nil
	case "matmul":
		return dense(tensor.MatMul(in[0], in[1]))
	case "add":
		return dense(tensor.Add(in[0], in[1]))
	case "mul":
		return dense(tensor.Mul(in[0], in[1]))
	case "scale":
		return dense(tensor.Mul(in[0], o.Value))
	case "transpose":
		c := in[0].Clone().(*tensor.Dense)
		if err := c.T(); err != nil {
			return nil, err
		}
		if err := c.Transpose(); err != nil { // materialise the new layout
			return nil, err
		}
		return c, nil
	case "relu":
		c := in[0].Clone().(*tensor.Dense)
		for i, x := range c.Float64s() {
			if x < 0 {
				c.Float64s()[i] = 0
			}
		}
		return c, nil
	case "row":
		s, err := in[0].Slice(tensor.S(o.Rank))
		if err != nil {
			return nil, err
		}
		return s.(*tensor.Dense).Materialize().(*tensor.Dense), nil
	case "rref":
		return runRRef(ctx, o, in[0])
	case "drop":
		store.Lock()
		delete(store.m, o.In[0])
		store.Unlock()
		return nil, nil
	}
	return nil, fmt.Errorf("dtensor: unknown op %q", o.Kind)
}

func dense(t tensor.Tensor, err error) (*tensor.Dense, error) {
	if err != nil {
		return nil, err
	}
	d, ok := t.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("dtensor: result is a %T", t)
	}
	return d, nil
}

func product(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// shardData is a shard as it travels to the client.
type shardData struct {
	Shape []int     `msgpack:"s"`
	Data  []float64 `msgpack:"d"`
}

var fetchFn = actorrt.Remote1("monarch_dtensor_fetch", func(ctx context.Context, id uint64) (shardData, error) {
	t, err := get(id)
	if err != nil {
		return shardData{}, err
	}
	c := t.Materialize().(*tensor.Dense)
	return shardData{Shape: c.Shape().Clone(), Data: append([]float64(nil), c.Float64s()...)}, nil
})
