package actorrt

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// actorType is a registered actor type: its endpoints, found once by
// reflection at Register and looked up by name on every message.
type actorType struct {
	name      string        // registry key and wire name: import path + "." + type name
	typ       reflect.Type  // T
	init      *method       // Init, or nil
	supervise reflect.Value // Supervise(*T, *Context, *MeshFailure) bool, or the zero Value
	endpoints map[string]*method
}

// method is an endpoint (or Init) of an actor type.
type method struct {
	name   string
	fn     reflect.Value  // the method as a function taking *T first
	args   []reflect.Type // parameters after the *Context
	result reflect.Type   // nil for an endpoint that returns only error
	owner  *actorType
	// port is the Port[R] type of an explicit-response endpoint, whose
	// first argument is the port it answers on, later, from anywhere.
	port reflect.Type
	// void0, when set, calls a method of no arguments that returns only
	// error without reflection (the shape of most broadcasts).
	void0 func(recv any, ctx *Context) error
}

var (
	contextType = reflect.TypeFor[*Context]()
	errorType   = reflect.TypeFor[error]()
)

// registry maps type names to registered types. It is written by Register,
// before the runtime serves, and read on every spawn and call.
var registry = struct {
	sync.RWMutex
	types  map[string]*actorType
	failed map[string]error // why a Register failed, for a better error at Spawn
	byPC   sync.Map         // function entry PC -> *method, for adverbs
}{types: map[string]*actorType{}, failed: map[string]error{}}

// Register makes actor type T known to this program, in every process of
// the job. Call it in main before Main, once per type.
//
// The exported methods of *T whose first parameter is *Context are T's
// endpoints. An endpoint returns (R, error) or just error, and its other
// parameters and R must be encodable: no channels, functions or interfaces.
// An optional method Init(ctx *Context, args...) error receives Spawn's
// arguments. Register refuses a method it could not serve, naming it.
func Register[T any]() error {
	t := reflect.TypeFor[T]()
	name := typeName(t)
	at, err := inspect(t)
	if err == nil {
		for _, m := range at.endpoints {
			if f, ok := m.fn.Interface().(func(*T, *Context) error); ok {
				m.void0 = func(recv any, ctx *Context) error { return f(recv.(*T), ctx) }
			}
		}
	}
	registry.Lock()
	defer registry.Unlock()
	if err != nil {
		registry.failed[name] = err
		return err
	}
	if _, dup := registry.types[name]; dup {
		return fmt.Errorf("actorrt: Register[%s]: registered twice", name)
	}
	registry.types[name] = at
	delete(registry.failed, name)
	return nil
}

func typeName(t reflect.Type) string {
	if t.PkgPath() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

func inspect(t reflect.Type) (*actorType, error) {
	name := typeName(t)
	if t.Name() == "" || t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
		return nil, fmt.Errorf("%w: Register[%s]: an actor type is a named non-pointer type (Register[Counter], not Register[*Counter])", ErrBadEndpoint, t)
	}
	at := &actorType{name: name, typ: t, endpoints: map[string]*method{}}
	pt := reflect.PointerTo(t)
	for i := 0; i < pt.NumMethod(); i++ {
		m := pt.Method(i)
		ft := m.Type // receiver first
		if m.Name == "Supervise" {
			if ft.NumIn() != 3 || ft.In(1) != contextType || ft.In(2) != reflect.TypeFor[*MeshFailure]() ||
				ft.NumOut() != 1 || ft.Out(0) != reflect.TypeFor[bool]() {
				return nil, fmt.Errorf("%w: Register[%s]: Supervise must be func(ctx *actorrt.Context, f *actorrt.MeshFailure) bool", ErrBadEndpoint, name)
			}
			at.supervise = m.Func
			continue
		}
		if ft.NumIn() < 2 || ft.In(1) != contextType {
			if m.Name == "Init" {
				return nil, fmt.Errorf("%w: Register[%s]: Init must take (*actorrt.Context, args...) and return error", ErrBadEndpoint, name)
			}
			continue // a plain method, not an endpoint
		}
		me := &method{name: m.Name, fn: m.Func, owner: at}
		first := 2
		if ft.NumIn() > 2 && ft.In(2).Implements(portIface) {
			if ft.NumOut() != 1 || ft.Out(0) != errorType || m.Name == "Init" {
				return nil, fmt.Errorf("%w: Register[%s]: method %s takes a %s first, so it answers on that port: it must return only error", ErrBadEndpoint, name, m.Name, ft.In(2))
			}
			me.port = ft.In(2)
			first = 3
		}
		for j := first; j < ft.NumIn(); j++ {
			if ft.IsVariadic() && j == ft.NumIn()-1 {
				return nil, fmt.Errorf("%w: Register[%s]: method %s is variadic; pass a slice instead", ErrBadEndpoint, name, m.Name)
			}
			if err := checkWire(ft.In(j), map[reflect.Type]bool{}); err != nil {
				return nil, fmt.Errorf("%w: Register[%s]: method %s, parameter %d (%s): %v", ErrBadEndpoint, name, m.Name, j-1, ft.In(j), err)
			}
			me.args = append(me.args, ft.In(j))
		}
		switch {
		case ft.NumOut() == 1 && ft.Out(0) == errorType:
		case ft.NumOut() == 2 && ft.Out(1) == errorType:
			if err := checkWire(ft.Out(0), map[reflect.Type]bool{}); err != nil {
				return nil, fmt.Errorf("%w: Register[%s]: method %s, result %s: %v", ErrBadEndpoint, name, m.Name, ft.Out(0), err)
			}
			me.result = ft.Out(0)
		default:
			return nil, fmt.Errorf("%w: Register[%s]: method %s returns %s; an endpoint returns (R, error) or error", ErrBadEndpoint, name, m.Name, outs(ft))
		}
		if m.Name == "Init" {
			if me.result != nil {
				return nil, fmt.Errorf("%w: Register[%s]: Init must return only error", ErrBadEndpoint, name)
			}
			at.init = me
			continue
		}
		at.endpoints[m.Name] = me
	}
	return at, nil
}

func outs(ft reflect.Type) string {
	var s []string
	for i := 0; i < ft.NumOut(); i++ {
		s = append(s, ft.Out(i).String())
	}
	return "(" + strings.Join(s, ", ") + ")"
}

var (
	customEncoder = reflect.TypeFor[msgpack.CustomEncoder]()
	customDecoder = reflect.TypeFor[msgpack.CustomDecoder]()
	marshaler     = reflect.TypeFor[msgpack.Marshaler]()
	unmarshaler   = reflect.TypeFor[msgpack.Unmarshaler]()
)

// checkWire tells why values of t cannot travel in a message, or nil.
func checkWire(t reflect.Type, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	pt := reflect.PointerTo(t)
	either := func(i reflect.Type) bool { return t.Implements(i) || pt.Implements(i) }
	if either(customEncoder) && either(customDecoder) || either(marshaler) && either(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Uintptr, reflect.Complex64, reflect.Complex128:
		return fmt.Errorf("a %s cannot be sent in a message", t.Kind())
	case reflect.Interface:
		return fmt.Errorf("interface type %s cannot be decoded without a concrete type; use a concrete type", t)
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return checkWire(t.Elem(), seen)
	case reflect.Map:
		if err := checkWire(t.Key(), seen); err != nil {
			return err
		}
		return checkWire(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("msgpack") == "-" {
				continue
			}
			if err := checkWire(f.Type, seen); err != nil {
				return fmt.Errorf("field %s: %w", f.Name, err)
			}
		}
	}
	return nil
}

// lookupType returns the registered type of T, or why it is not there.
func lookupType(t reflect.Type) (*actorType, error) {
	return lookupTypeName(typeName(t))
}

func lookupTypeName(name string) (*actorType, error) {
	registry.RLock()
	defer registry.RUnlock()
	if at := registry.types[name]; at != nil {
		return at, nil
	}
	if err := registry.failed[name]; err != nil {
		return nil, fmt.Errorf("%w: %s (Register failed: %v)", ErrNotRegistered, name, err)
	}
	return nil, fmt.Errorf("%w: %s (call actorrt.Register[%s]() in main, before actorrt.Main)", ErrNotRegistered, name, shortName(name))
}

func shortName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// endpointOf finds the endpoint behind a method expression such as
// (*Counter).GetValue. The compiler has already checked its signature
// against the mesh's actor type; this finds its name, once per function.
func endpointOf(fn any, at *actorType) (*method, error) {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return nil, fmt.Errorf("%w: nil endpoint", ErrBadEndpoint)
	}
	pc := v.Pointer()
	if m, ok := registry.byPC.Load(pc); ok && m.(*method).owner == at {
		return m.(*method), nil
	}
	full := runtime.FuncForPC(pc).Name()
	dot := strings.LastIndexByte(full, '.')
	recv := ".(*" + stripTypeArgs(at.typ.Name()) + ")."
	if dot < 0 || !strings.HasSuffix(stripTypeArgs(full[:dot+1]), recv) {
		return nil, fmt.Errorf("%w: %s is not a method expression of %s (write (*%s).Method)", ErrBadEndpoint, full, at.name, at.typ.Name())
	}
	m := at.endpoints[full[dot+1:]]
	if m == nil {
		return nil, fmt.Errorf("%w: %s is not an endpoint of %s", ErrBadEndpoint, full[dot+1:], at.name)
	}
	registry.byPC.Store(pc, m)
	return m, nil
}

func stripTypeArgs(s string) string {
	for {
		i := strings.IndexByte(s, '[')
		if i < 0 {
			return s
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			return s
		}
		s = s[:i] + s[i+j+1:]
	}
}
