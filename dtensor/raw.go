package dtensor

import (
	"fmt"

	"github.com/monarch-go/monarch/ibverbs"
	"github.com/vmihailenco/msgpack/v5"
)

// f64s is shard data on the wire: its raw little-endian bytes in one
// msgpack bin, not an array of numbers (9 bytes and a decode per
// element).
type f64s []float64

func (v f64s) EncodeMsgpack(e *msgpack.Encoder) error {
	return e.EncodeBytes(ibverbs.Bytes([]float64(v)))
}

func (v *f64s) DecodeMsgpack(d *msgpack.Decoder) error {
	b, err := d.DecodeBytes()
	if err != nil {
		return err
	}
	if len(b)%8 != 0 {
		return fmt.Errorf("dtensor: %d bytes of float64 data", len(b))
	}
	out := make([]float64, len(b)/8)
	copy(ibverbs.Bytes(out), b)
	*v = out
	return nil
}
