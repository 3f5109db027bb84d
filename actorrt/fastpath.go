package actorrt

import (
	"reflect"

	"github.com/monarch-go/monarch/internal/wire"
)

// Fast paths of the receive side. Most endpoints take no argument or a
// few plain ones ([]byte, string, int, int64, float64, bool), and most
// broadcasts return only error. For these the arguments are read by hand
// (wire.Values) instead of by the msgpack decoder, and an endpoint of at
// most one plain argument that returns only error is called without
// reflection. A payload the fast path does not read (another encoding,
// a malformed one) goes the general way, which gives the same values and
// the same errors as before.

var bytesType = reflect.TypeFor[[]byte]()

// argReader reads one plain argument as a reflect.Value of its type.
type argReader func(*wire.Values) (reflect.Value, bool)

var argReaders = map[reflect.Type]argReader{
	reflect.TypeFor[[]byte]():  plain((*wire.Values).Bytes),
	reflect.TypeFor[string]():  plain((*wire.Values).String),
	reflect.TypeFor[int]():     plain(readInt),
	reflect.TypeFor[int64]():   plain((*wire.Values).Int),
	reflect.TypeFor[float64](): plain((*wire.Values).Float64),
	reflect.TypeFor[bool]():    plain((*wire.Values).Bool),
}

// plain is the argReader of the values read reads.
func plain[A any](read func(*wire.Values) (A, bool)) argReader {
	return func(v *wire.Values) (reflect.Value, bool) {
		x, ok := read(v)
		return reflect.ValueOf(x), ok
	}
}

// readInt reads an int as msgpack/v5 does (reflect's SetInt: it wraps
// where int is narrower than 64 bits).
func readInt(v *wire.Values) (int, bool) {
	n, ok := v.Int()
	return int(n), ok
}

// plainReaders is a reader for each of types, or nil unless every one is
// plain.
func plainReaders(types []reflect.Type) []argReader {
	if len(types) == 0 {
		return nil
	}
	out := make([]argReader, len(types))
	for i, t := range types {
		if out[i] = argReaders[t]; out[i] == nil {
			return nil
		}
	}
	return out
}

// readPlainArgs reads an argument list of plain values into into; false
// if p is not one that the fast path reads. With sole, a large []byte
// argument shares p (wire.ReadValues).
func readPlainArgs(p []byte, sole bool, readers []argReader, into []reflect.Value) bool {
	v := wire.ReadValues(p, sole)
	if n, ok := v.ArrayLen(); !ok || n != len(readers) {
		return false
	}
	for i, read := range readers {
		x, ok := read(&v)
		if !ok {
			return false
		}
		into[i] = x
	}
	return v.End()
}

// call1 calls f, an endpoint of one plain argument that returns only
// error, without reflection; handled is false if the payload is not one
// the fast path reads, and f was not called.
func call1[T, A any](f func(*T, *Context, A) error, read func(*wire.Values) (A, bool)) func(recv any, ctx *Context, p []byte, sole bool) (handled bool, err error) {
	return func(recv any, ctx *Context, p []byte, sole bool) (bool, error) {
		v := wire.ReadValues(p, sole)
		if n, ok := v.ArrayLen(); !ok || n != 1 {
			return false, nil
		}
		a, ok := read(&v)
		if !ok || !v.End() {
			return false, nil
		}
		return true, f(recv.(*T), ctx, a)
	}
}

// setFastPaths gives endpoint m of actor type T the fast paths its shape
// allows.
func setFastPaths[T any](m *method) {
	m.readers = plainReaders(m.args)
	switch f := m.fn.Interface().(type) {
	case func(*T, *Context) error:
		m.void0 = func(recv any, ctx *Context) error { return f(recv.(*T), ctx) }
	case func(*T, *Context, []byte) error:
		m.void1 = call1(f, (*wire.Values).Bytes)
	case func(*T, *Context, string) error:
		m.void1 = call1(f, (*wire.Values).String)
	case func(*T, *Context, int) error:
		m.void1 = call1(f, readInt)
	case func(*T, *Context, int64) error:
		m.void1 = call1(f, (*wire.Values).Int)
	case func(*T, *Context, float64) error:
		m.void1 = call1(f, (*wire.Values).Float64)
	case func(*T, *Context, bool) error:
		m.void1 = call1(f, (*wire.Values).Bool)
	}
}

// readPlainReply decodes a reply value of a plain type into v; false if T
// is not plain or p is not one the fast path reads (v is then untouched).
// A reply belongs to its port alone: a large []byte shares p.
func readPlainReply[T any](p []byte, v *T) bool {
	r := wire.ReadValues(p, true)
	var ok bool
	switch v := any(v).(type) {
	case *[]byte:
		ok = readPlain(&r, v, (*wire.Values).Bytes)
	case *string:
		ok = readPlain(&r, v, (*wire.Values).String)
	case *int:
		ok = readPlain(&r, v, readInt)
	case *int64:
		ok = readPlain(&r, v, (*wire.Values).Int)
	case *float64:
		ok = readPlain(&r, v, (*wire.Values).Float64)
	case *bool:
		ok = readPlain(&r, v, (*wire.Values).Bool)
	}
	return ok
}

// readPlain reads the one value of r into v if it is all r holds.
func readPlain[A any](r *wire.Values, v *A, read func(*wire.Values) (A, bool)) bool {
	x, ok := read(r)
	if !ok || !r.End() {
		return false
	}
	*v = x
	return true
}
