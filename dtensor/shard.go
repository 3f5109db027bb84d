package dtensor

import (
	"fmt"
	"github.com/monarch-go/monarch/actorrt"

	"github.com/vmihailenco/msgpack/v5"
	"gorgonia.org/tensor"
)

// Shard is a tensor shard as an endpoint argument or result. Passed as
// t.Shard() to an actor on the tensor's procs, it arrives as that proc's
// own shard of t (no data crosses the bus); a Shard an endpoint makes from
// a Dense (NewShard) travels as its data.
type Shard struct {
	T   *tensor.Dense // the shard's data, on the proc that holds it
	id  uint64        // a reference: the tensor whose shard this is, on the proc it is passed to
	err error         // why it cannot be passed (a nil or failed tensor's): the call's error
}

// NewShard wraps a local tensor, for an endpoint's result.
func NewShard(t *tensor.Dense) Shard { return Shard{T: t} }

// Shard refers to the tensor's shard on each proc, as an endpoint
// argument. A failed step's tensor makes a Shard whose call returns the
// step's error.
func (t *Tensor) Shard() Shard {
	if err := t.usable("shard"); err != nil {
		return Shard{err: err}
	}
	t.mesh.send() // the op that makes it goes now; an error shows at the next op
	return Shard{id: t.id}
}

type shardWire struct {
	ID    uint64 `msgpack:"id"`
	Shape []int  `msgpack:"s"`
	DType string `msgpack:"dt"`
	Raw   []byte `msgpack:"d"` // the data's raw little-endian bytes
}

func init() { actorrt.RegisterCodec(encodeShard, decodeShard) }

// encodeShard sends a reference, or the data of a local shard: Shard's
// codec (RegisterCodec keeps it off Shard's method set).
func encodeShard(e *msgpack.Encoder, s Shard) error {
	if s.err != nil {
		return s.err
	}
	if s.id != 0 {
		return e.Encode(&shardWire{ID: s.id})
	}
	if s.T == nil {
		return fmt.Errorf("dtensor: empty Shard")
	}
	dt, raw := rawOf(s.T)
	return e.Encode(&shardWire{Shape: s.T.Shape().Clone(), DType: dt, Raw: raw})
}

// decodeShard resolves a reference to this proc's shard, or rebuilds a
// shard from its data.
func decodeShard(d *msgpack.Decoder, s *Shard) error {
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
	t, err := denseOf(w.DType, w.Shape, w.Raw)
	if err != nil {
		return err
	}
	s.T = t
	return nil
}
