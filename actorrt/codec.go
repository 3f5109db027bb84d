package actorrt

import (
	"fmt"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/monarch-go/monarch/actorrt/internal/wirecheck"
)

// RegisterCodec gives values of T a wire codec made of two functions: for
// a type whose fields do not cross the wire as they are (unexported
// ones, a handle to state of its process), when it should not carry
// exported EncodeMsgpack and DecodeMsgpack methods for that, or when it
// is another package's type. Endpoints, remote functions and channels
// whose values hold a T pass the wire check (Register) once it is
// registered. Call it from an init function, in every process alike (the
// procs run the same binary), before a value of T, or of a type holding
// one, is first encoded or decoded.
func RegisterCodec[T any](encode func(*msgpack.Encoder, T) error, decode func(*msgpack.Decoder, *T) error) {
	t := reflect.TypeFor[T]()
	msgpack.Register(reflect.Zero(t).Interface(),
		func(e *msgpack.Encoder, v reflect.Value) error { return encode(e, v.Interface().(T)) },
		func(d *msgpack.Decoder, v reflect.Value) error {
			if !v.CanAddr() {
				return fmt.Errorf("actorrt: cannot decode into a %s that is not addressable", t)
			}
			return decode(d, v.Addr().Interface().(*T))
		})
	wirecheck.Registered(t)
}
