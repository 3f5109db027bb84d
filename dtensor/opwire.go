package dtensor

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// An op's wire form. A training step is tens of ops, which every proc
// decodes: an op is one msgpack array of its fields in a fixed order
// (opFields of them, in the order of the struct), each nil or zero when
// empty, read and written by hand rather than by msgpack's reflection
// over a map of the fields' names. The fields an op rarely carries (a
// communicator, a graph, a handle) go through msgpack as values. A batch
// of ops (and a grad op's deferred ops) is an array of ops, or nil.

// opFields is how many fields an op's array has.
const opFields = 21

// EncodeMsgpack writes o as its array of fields.
func (o op) EncodeMsgpack(e *msgpack.Encoder) error {
	w := opWriter{e: e}
	w.check(e.EncodeArrayLen(opFields))
	w.check(e.EncodeString(o.Kind))
	w.check(e.EncodeUint(o.Out))
	w.uints(o.In)
	w.ints(o.Shape)
	w.check(e.EncodeUint(o.Seed))
	w.check(e.EncodeInt(int64(o.Rank)))
	w.check(e.EncodeInt(int64(o.Index)))
	w.check(e.EncodeFloat64(o.Value))
	w.check(e.EncodeString(o.Name))
	w.raw(o.Mesh)
	w.strings(o.Dims)
	w.check(e.Encode(o.Comm))
	w.check(e.EncodeString(o.CommID))
	w.check(e.Encode(o.Graph))
	w.ints(o.Wrt)
	w.uints(o.Leaves)
	w.check(e.Encode(o.Handle))
	w.check(e.EncodeString(o.DType))
	w.check(e.EncodeBytes(o.Raw))
	w.floats(o.Hyper)
	w.check(batch(o.Defer).EncodeMsgpack(e))
	return w.err
}

// DecodeMsgpack reads o from its array of fields.
func (o *op) DecodeMsgpack(d *msgpack.Decoder) error { return o.decode(d, true) }

// decode reads o; its deferred ops, if mayDefer, else none: a grad op
// carries ops, which carry none, so a payload cannot nest them deeper
// (and grow the decoder's stack with its length).
func (o *op) decode(d *msgpack.Decoder, mayDefer bool) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != opFields {
		return fmt.Errorf("dtensor: an op of %d fields, want %d", n, opFields)
	}
	r := opReader{d: d}
	*o = op{
		Kind:  r.string(),
		Out:   r.uint(),
		In:    r.uints(),
		Shape: r.ints(),
		Seed:  r.uint(),
		Rank:  r.int(),
		Index: r.int(),
		Value: r.float(),
		Name:  r.string(),
		Mesh:  r.raw(),
		Dims:  r.strings(),
	}
	r.value(&o.Comm)
	o.CommID = r.string()
	r.value(&o.Graph)
	o.Wrt = r.ints()
	o.Leaves = r.uints()
	r.value(&o.Handle)
	o.DType = r.string()
	o.Raw = r.bytes()
	o.Hyper = r.floats()
	if r.err == nil && mayDefer {
		var b batch
		r.err = b.decode(d, false)
		o.Defer = b
	} else if r.err == nil {
		if n, err := d.DecodeArrayLen(); err != nil {
			r.err = err
		} else if n > 0 {
			r.err = fmt.Errorf("dtensor: deferred ops within deferred ops")
		}
	}
	return r.err
}

// batch is ops as they travel together: a batch of the outbox, the ops
// a grad op carries.
type batch []op

// EncodeMsgpack writes b as an array of ops (nil as nil).
func (b batch) EncodeMsgpack(e *msgpack.Encoder) error {
	if b == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(b)); err != nil {
		return err
	}
	for _, o := range b {
		if err := o.EncodeMsgpack(e); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads b from its array of ops; its room grows with the
// ops it holds, not with the length the array claims.
func (b *batch) DecodeMsgpack(d *msgpack.Decoder) error { return b.decode(d, true) }

// decode reads b; its ops may carry deferred ops if mayDefer.
func (b *batch) decode(d *msgpack.Decoder, mayDefer bool) error {
	n, err := d.DecodeArrayLen()
	if err != nil || n < 0 {
		*b = nil
		return err
	}
	ops := make(batch, 0, min(n, maxBatch))
	for range n {
		var o op
		if err := o.decode(d, mayDefer); err != nil {
			return err
		}
		ops = append(ops, o)
	}
	*b = ops
	return nil
}

// opWriter writes an op's fields, keeping the first error.
type opWriter struct {
	e   *msgpack.Encoder
	err error
}

func (w *opWriter) check(err error) {
	if w.err == nil {
		w.err = err
	}
}

// list writes a slice of n elements (nil: msgpack's nil), each by elem.
func (w *opWriter) list(isNil bool, n int, elem func(i int) error) {
	if isNil {
		w.check(w.e.EncodeNil())
		return
	}
	w.check(w.e.EncodeArrayLen(n))
	for i := 0; i < n && w.err == nil; i++ {
		w.check(elem(i))
	}
}

func (w *opWriter) uints(xs []uint64) {
	w.list(xs == nil, len(xs), func(i int) error { return w.e.EncodeUint(xs[i]) })
}

func (w *opWriter) ints(xs []int) {
	w.list(xs == nil, len(xs), func(i int) error { return w.e.EncodeInt(int64(xs[i])) })
}

func (w *opWriter) strings(xs []string) {
	w.list(xs == nil, len(xs), func(i int) error { return w.e.EncodeString(xs[i]) })
}

// raw writes b, a msgpack value, as it is, in line (nil as msgpack's
// nil): not as bytes, so that the payload's check on arrival
// (wire.CheckMsgpack, for every call's arguments) walks its lengths too.
func (w *opWriter) raw(b []byte) {
	if b == nil {
		w.check(w.e.EncodeNil())
		return
	}
	w.check(w.e.Encode(msgpack.RawMessage(b)))
}

func (w *opWriter) floats(xs []float64) {
	w.list(xs == nil, len(xs), func(i int) error { return w.e.EncodeFloat64(xs[i]) })
}

// opReader reads an op's fields, keeping the first error: after one,
// every read gives the zero value.
type opReader struct {
	d   *msgpack.Decoder
	err error
}

// read is what f reads, unless r has failed already.
func read[T any](r *opReader, f func() (T, error)) T {
	var v T
	if r.err == nil {
		v, r.err = f()
	}
	return v
}

func (r *opReader) string() string { return read(r, r.d.DecodeString) }
func (r *opReader) uint() uint64   { return read(r, r.d.DecodeUint64) }
func (r *opReader) int() int       { return read(r, r.d.DecodeInt) }
func (r *opReader) float() float64 { return read(r, r.d.DecodeFloat64) }
func (r *opReader) bytes() []byte  { return read(r, r.d.DecodeBytes) }

// raw reads a value written by opWriter.raw, nil as nil.
func (r *opReader) raw() []byte {
	b := read(r, r.d.DecodeRaw)
	if len(b) == 1 && b[0] == msgpcode.Nil {
		return nil
	}
	return b
}

func (r *opReader) value(v any) {
	if r.err == nil {
		r.err = r.d.Decode(v)
	}
}

// list reads a slice (nil for msgpack's nil) of elements read by elem;
// its room grows with what it holds, not with the length it claims.
func list[T any](r *opReader, elem func() T) []T {
	if r.err != nil {
		return nil
	}
	n, err := r.d.DecodeArrayLen()
	if err != nil || n < 0 {
		r.err = err
		return nil
	}
	xs := make([]T, 0, min(n, 64))
	for range n {
		x := elem()
		if r.err != nil {
			return nil
		}
		xs = append(xs, x)
	}
	return xs
}

func (r *opReader) uints() []uint64   { return list(r, r.uint) }
func (r *opReader) ints() []int       { return list(r, r.int) }
func (r *opReader) strings() []string { return list(r, r.string) }
func (r *opReader) floats() []float64 { return list(r, r.float) }
