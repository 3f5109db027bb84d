package dtensor

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"gorgonia.org/tensor"
)

// Shard is a tensor shard as an endpoint argument or result. Passed as
// t.Shard() to an actor on the tensor's procs, it arrives as that proc's
// own shard of t (no data crosses the bus); a Shard an endpoint makes from
// a Dense (NewShard) travels as its data.
type Shard struct {
	T  *tensor.Dense
	id uint64
}

// NewShard wraps a local tensor, for an endpoint's result.
func NewShard(t *tensor.Dense) Shard { return Shard{T: t} }

// Shard refers to the tensor's shard on each proc, as an endpoint
// argument.
func (t *Tensor) Shard() Shard { return Shard{id: t.id} }

type shardWire struct {
	ID    uint64 `msgpack:"id"`
	Shape []int  `msgpack:"s"`
	Data  f64s   `msgpack:"d"`
}

// EncodeMsgpack sends a reference, or the data of a local shard.
func (s Shard) EncodeMsgpack(e *msgpack.Encoder) error {
	if s.id != 0 {
		return e.Encode(&shardWire{ID: s.id})
	}
	if s.T == nil {
		return fmt.Errorf("dtensor: empty Shard")
	}
	c := s.T.Materialize().(*tensor.Dense)
	return e.Encode(&shardWire{Shape: c.Shape().Clone(), Data: c.Float64s()})
}

// DecodeMsgpack resolves a reference to this proc's shard, or rebuilds a
// shard from its data.
func (s *Shard) DecodeMsgpack(d *msgpack.Decoder) error {
	var w shardWire
	if err := d.Decode(&w); err != nil {
		return err
	}
	if w.ID != 0 {
		t, err := await(w.ID)
		if err != nil {
			return err
		}
		s.T, s.id = t, 0
		return nil
	}
	if product(w.Shape) != len(w.Data) {
		return fmt.Errorf("dtensor: shard of shape %v with %d values", w.Shape, len(w.Data))
	}
	s.T = tensor.New(tensor.WithShape(w.Shape...), tensor.WithBacking(w.Data))
	return nil
}
