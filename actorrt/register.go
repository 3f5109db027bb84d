package actorrt

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// actorType is a registered actor type: its endpoints, found once by
// reflection at Register and looked up by name on every message.
type actorType struct {
	name      string        // registry key and wire name: import path + "." + type name
	typ       reflect.Type  // T
	init      *method       // Init, or nil
	supervise reflect.Value // Supervise(*T, *Context, *MeshFailure) bool, or the zero Value
	cleanup   reflect.Value // Cleanup(*T, *Context, error) error, or the zero Value
	endpoints map[string]*method
	// statNames names the endpoints counted for the job state feed, by
	// slot (method.stat - 1): every endpoint, by name, then Supervise if
	// there is one (superviseStat).
	statNames     []string
	superviseStat int
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
	// error without reflection (the shape of most broadcasts); void1 one
	// of a plain argument (fastpath.go).
	void0 func(recv any, ctx *Context) error
	void1 func(recv any, ctx *Context, p []byte, sole bool) (handled bool, err error)
	// readers reads the arguments when they are all plain (fastpath.go).
	readers []argReader
	// limit, when above zero, makes the endpoint concurrent: each call runs
	// in a goroutine of its own, at most limit at once per actor
	// (concurrent.go).
	limit int
	// stat is the endpoint's slot in its actor's endpoint stats plus one
	// (actorType.statNames); 0: not counted (Init).
	stat int
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
	byPC   sync.Map         // a method expression's entry PC -> its *method, for the adverbs
}{types: map[string]*actorType{}, failed: map[string]error{}}

// Register makes actor type T known to this program, in every process of
// the job. Call it in main before Main, once per type.
//
// The exported methods of *T whose first parameter is *Context are T's
// endpoints. An endpoint returns (R, error) or just error. An optional
// method Init(ctx *Context, args...) error receives Spawn's arguments; an
// optional Supervise(ctx *Context, f *MeshFailure) bool takes the
// failures of the meshes the actor owns; an optional Cleanup(ctx
// *Context, cause error) error runs once when the actor stops (see
// WithCleanupTimeout). None of the three is an endpoint, and a wrong
// signature for any of them is an error, not a method ignored.
//
// The other parameters and R travel as msgpack and must arrive as they
// were sent. Register refuses a type that would not: a channel, function
// or interface; a struct field that is unexported (unless it is tagged
// `msgpack:"-"`, or the struct has a msgpack codec of its own: EncodeMsgpack
// and DecodeMsgpack, or MarshalMsgpack and UnmarshalMsgpack, ..., or one
// given by RegisterCodec); two
// fields msgpack would send under one name; a codec only an embedded field
// lends; a map keyed by pointers. Meshes (by pointer: *ActorMesh, *ProcMesh,
// *HostMesh), ports, points, extents, value meshes and errors all travel.
//
// Register refuses a method it could not serve, and lists every problem of
// every method of T in one error (ErrBadEndpoint), one per line, each with
// the endpoint, the parameter or result, the field's path and the fix.
//
// Options change how some endpoints are served: Concurrent and
// ConcurrentLimit make an endpoint concurrent. A bad option (an endpoint
// of another type, a bound below 1, an endpoint named twice) fails
// Register with ErrBadEndpoint, as a bad method does.
func Register[T any](opts ...RegisterOption) error {
	t := reflect.TypeFor[T]()
	// A mesh of T can then be decoded in every proc, whatever brings it
	// (wirevalue.go).
	prepareWire(reflect.TypeFor[ActorMesh[T]]())
	name := typeName(t)
	at, err := inspect(t)
	if err == nil {
		err = applyOptions(at, opts)
	}
	if err == nil {
		for _, m := range at.endpoints {
			setFastPaths[T](m)
		}
		if at.init != nil {
			setFastPaths[T](at.init)
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

// setStats gives each endpoint (and Supervise) its slot in an actor's
// endpoint stats, in order of their names.
func (at *actorType) setStats() {
	at.statNames = slices.Sorted(maps.Keys(at.endpoints))
	for i, name := range at.statNames {
		at.endpoints[name].stat = i + 1
	}
	if at.supervise.IsValid() {
		at.statNames = append(at.statNames, superviseMethod.name)
		at.superviseStat = len(at.statNames)
	}
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
	// Every problem of every method, so that one run shows them all.
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	pt := reflect.PointerTo(t)
	for i := 0; i < pt.NumMethod(); i++ {
		m := pt.Method(i)
		ft := m.Type // receiver first
		ep := t.Name() + "." + m.Name
		if m.Name == "Supervise" {
			if ft.NumIn() != 3 || ft.In(1) != contextType || ft.In(2) != reflect.TypeFor[*MeshFailure]() ||
				ft.NumOut() != 1 || ft.Out(0) != reflect.TypeFor[bool]() {
				bad("%s must be func(ctx *actorrt.Context, f *actorrt.MeshFailure) bool", ep)
				continue
			}
			at.supervise = m.Func
			continue
		}
		if m.Name == "Cleanup" {
			if ft.NumIn() != 3 || ft.In(1) != contextType || ft.In(2) != errorType ||
				ft.NumOut() != 1 || ft.Out(0) != errorType {
				bad("%s must be func(ctx *actorrt.Context, cause error) error", ep)
				continue
			}
			at.cleanup = m.Func
			continue
		}
		if ft.NumIn() < 2 || ft.In(1) != contextType {
			if m.Name == "Init" {
				bad("%s must take (*actorrt.Context, args...) and return error", ep)
			}
			continue // a plain method, not an endpoint
		}
		me := &method{name: m.Name, fn: m.Func, owner: at}
		n := len(problems)
		first := 2
		if ft.NumIn() > 2 && ft.In(2).Kind() != reflect.Pointer && ft.In(2).Implements(portIface) {
			if ft.NumOut() != 1 || ft.Out(0) != errorType || m.Name == "Init" {
				bad("%s takes a %s first, so it answers on that port: it must return only error", ep, ft.In(2))
				continue
			}
			me.port = ft.In(2)
			first = 3
			r := reflect.Zero(me.port).Interface().(portType).portElem()
			for _, p := range wireProblems(r) {
				bad("%s, result (%s, sent on its %s): %s", ep, r, me.port, p)
			}
		}
		for j := first; j < ft.NumIn(); j++ {
			if ft.IsVariadic() && j == ft.NumIn()-1 {
				bad("%s is variadic; pass a slice instead", ep)
				break
			}
			for _, p := range wireProblems(ft.In(j)) {
				bad("%s, parameter %d (%s): %s", ep, j-1, ft.In(j), p)
			}
			me.args = append(me.args, ft.In(j))
		}
		switch {
		case ft.NumOut() == 1 && ft.Out(0) == errorType:
		case ft.NumOut() == 2 && ft.Out(1) == errorType:
			for _, p := range wireProblems(ft.Out(0)) {
				bad("%s, result (%s): %s", ep, ft.Out(0), p)
			}
			me.result = ft.Out(0)
		default:
			bad("%s returns %s; an endpoint returns (R, error) or error", ep, outs(ft))
		}
		if m.Name == "Init" && me.result != nil {
			bad("%s must return only error", ep)
		}
		if len(problems) > n {
			continue
		}
		if m.Name == "Init" {
			at.init = me
			continue
		}
		at.endpoints[m.Name] = me
	}
	switch len(problems) {
	case 0:
		at.setStats()
		return at, nil
	case 1:
		return nil, fmt.Errorf("%w: Register[%s]: %s", ErrBadEndpoint, t, problems[0])
	}
	return nil, fmt.Errorf("%w: Register[%s]: %d problems:\n\t%s", ErrBadEndpoint, t, len(problems), strings.Join(problems, "\n\t"))
}

func outs(ft reflect.Type) string {
	var s []string
	for i := 0; i < ft.NumOut(); i++ {
		s = append(s, ft.Out(i).String())
	}
	return "(" + strings.Join(s, ", ") + ")"
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
// against the mesh's actor type; this finds its name, once per method.
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
