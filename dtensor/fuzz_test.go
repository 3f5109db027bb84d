package dtensor

import (
	"reflect"
	"testing"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// FuzzShardData: a shard's data off the wire (the msgpack of a shard
// result, its element type, shape and raw bytes) becomes a shard of
// exactly that shape and type, or an error; never a panic, never more
// memory than its bytes.
func FuzzShardData(f *testing.F) {
	for _, w := range []shardWire{
		{Shape: []int{2, 2}, DType: Float64, Raw: make([]byte, 32)},
		{Shape: []int{3}, DType: Float32, Raw: make([]byte, 12)},
		{Shape: []int{1 << 40}, DType: Float64, Raw: make([]byte, 8)},
		{Shape: []int{-1, -8}, DType: Float32, Raw: make([]byte, 32)},
	} {
		b, err := msgpack.Marshal(&w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// As the runtime decodes what arrives: lengths checked against
		// the bytes first (wire.DecodePayload).
		var w shardWire
		err := wire.DecodePayload(data, []reflect.Type{reflect.TypeOf(w)}, func(d *msgpack.Decoder) error { return d.Decode(&w) })
		if err != nil || w.ID != 0 {
			return // the ID path waits for a tensor of this proc's store
		}
		d, err := denseOf(w.DType, w.Shape, w.Raw)
		if err != nil {
			return
		}
		if d.Shape().TotalSize() != product(w.Shape) || dtypeOf(d) != map[string]string{"": Float64}[w.DType]+w.DType {
			t.Fatalf("%+v became a shard of shape %v and type %s", w, d.Shape(), dtypeOf(d))
		}
	})
}
