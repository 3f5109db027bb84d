package actorrt

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/monarch-go/monarch/actorrt/internal/wirecheck"
	"github.com/monarch-go/monarch/internal/wire"
)

// Wire values: the types of this package that travel by a codec of their
// own (extents, points, meshes, value meshes, ports). Their codecs are
// unexported methods, registered with msgpack by type (msgpack.Register)
// rather than found by msgpack as exported EncodeMsgpack/DecodeMsgpack
// methods, so that they stay off the package's method sets. What travels
// is the same either way.
//
// msgpack keeps the codec it first finds for a type, and for every type
// that holds it, so a type must be registered before a value of it, or of
// a type holding it, is first encoded or decoded. The plain types are
// registered at init. A generic type (ActorMesh[A], ValueMesh[T],
// Port[T]) is registered for each of its instances as it is met: by
// prepareWire, which Register and Remote call on the types of arguments
// and results (so a call's arguments, typed by its endpoint or function,
// need nothing more on the message path), and which the paths that
// encode or decode a value of a caller's own type (a port's, a reply's,
// a channel's) call on that type first. Register[A] also registers
// ActorMesh[A], so that a mesh reference travels in msgpack of a
// package's own (dtensor's RRef sends one so) in every proc that
// registered its type.

// wireProblems lists why values of t cannot travel in a message, one
// problem each; none if they can (the wire check, internal/wirecheck,
// which Register and Remote run on every argument and result type).
func wireProblems(t reflect.Type) []string {
	prepareWire(t)
	return wirecheck.Problems(t, wireValues{})
}

// checkWire is wireProblems as one error, or nil.
func checkWire(t reflect.Type) error {
	prepareWire(t)
	return wirecheck.Check(t, wireValues{})
}

// wireValues tells the wire check which types are this package's wire
// values.
type wireValues struct{}

func (wireValues) Own(t reflect.Type) bool { return isWireValue(t) }

func (wireValues) Carried(t reflect.Type) (reflect.Type, bool) { return carried(t) }

// valueCarrier is a type whose codec sends values of another type
// (ValueMesh[T]); Port[T] is one too (portType).
type valueCarrier interface{ valueElem() reflect.Type }

// carried is the type of the values t's codec sends in turn, if any.
func carried(t reflect.Type) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := reflect.Zero(t).Interface().(type) {
	case valueCarrier:
		return v.valueElem(), true
	case portType:
		return v.portElem(), true
	}
	return nil, false
}

// wireEncoder and wireDecoder are a wire value's codec. decodeWire has a
// pointer receiver; encodeWire either kind.
type wireEncoder interface{ encodeWire(*msgpack.Encoder) error }
type wireDecoder interface{ decodeWire(*msgpack.Decoder) error }

var wireDecoderIface = reflect.TypeFor[wireDecoder]()

func init() {
	for _, t := range []reflect.Type{reflect.TypeFor[Extent](), reflect.TypeFor[Point](), reflect.TypeFor[ProcMesh](), reflect.TypeFor[HostMesh]()} {
		registerWireValue(t)
	}
}

// isWireValue tells whether t is a wire value type.
func isWireValue(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(wireDecoderIface)
}

// registerWireValue gives msgpack the codec of wire value type t.
func registerWireValue(t reflect.Type) {
	msgpack.Register(reflect.Zero(t).Interface(), encodeWireValue, decodeWireValue)
}

func encodeWireValue(e *msgpack.Encoder, v reflect.Value) error {
	if !v.CanAddr() { // a copy, for the codecs with a pointer receiver
		c := reflect.New(v.Type()).Elem()
		c.Set(v)
		v = c
	}
	return v.Addr().Interface().(wireEncoder).encodeWire(e)
}

func decodeWireValue(d *msgpack.Decoder, v reflect.Value) error {
	if !v.CanAddr() {
		return fmt.Errorf("actorrt: cannot decode into a %s that is not addressable", v.Type())
	}
	return v.Addr().Interface().(wireDecoder).decodeWire(d)
}

// preparedWire holds the types prepareWire has walked.
var preparedWire sync.Map // reflect.Type → struct{}

// prepareWire registers the wire value types found in t (t itself, the
// element of a slice of them, a field of a struct, ...), once per t,
// before a value of t is encoded or decoded.
func prepareWire(t reflect.Type) {
	if t == nil {
		return
	}
	if _, ok := preparedWire.Load(t); ok {
		return
	}
	registerWireValues(t, map[reflect.Type]bool{})
	preparedWire.Store(t, struct{}{})
}

func registerWireValues(t reflect.Type, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if wire.IsBlock(t) { // a named []float32, a [16]int64: one block of bytes
			wire.RegisterBlock(t)
			return
		}
		registerWireValues(t.Elem(), seen)
	case reflect.Pointer:
		registerWireValues(t.Elem(), seen)
	case reflect.Map:
		registerWireValues(t.Key(), seen)
		registerWireValues(t.Elem(), seen)
	case reflect.Struct:
		if isWireValue(t) {
			registerWireValue(t)
			if elem, ok := carried(t); ok {
				registerWireValues(elem, seen)
			}
			return
		}
		for i := 0; i < t.NumField(); i++ {
			registerWireValues(t.Field(i).Type, seen)
		}
	}
}
