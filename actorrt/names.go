package actorrt

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Names. Every mesh spawned anywhere in the job registers its name with the
// client, which keeps the job's registry: Lookup finds a mesh by name from
// any process, and GetOrSpawn makes a singleton of the job at a name's
// first use. The client is the registry because it is the one process
// every other reaches and that lives as long as the job.
//
// Names are first-wins, not unique: two meshes of one name on different
// procs have always been allowed (each of several actors may spawn its
// own "workers"), and still are. The name belongs to the oldest live mesh
// that has it, and passes to the next once that one is stopped. A name is
// freed when its mesh is stopped (ActorMesh.Stop, or with its owner), or
// when every proc the mesh lived on was stopped (ProcMesh.Stop). A mesh
// whose members failed keeps its name until it is stopped: holders of it
// keep getting the failure, fast, rather than a mesh they did not mean.

// maxNames bounds the registry: far more live meshes than any job has. A
// registration past it is refused, and that Spawn fails.
const maxNames = 1 << 20

// answerMargin is how much longer than the spawn timeout a proc waits for
// the client's answer to GetOrSpawn: the client's own spawn gives up
// first, and the caller sees why.
const answerMargin = 10 * time.Second

// Lookup finds the mesh of the job named name, from any process: the
// client, which keeps the job's names, answers (a proc asks it and waits
// at most the spawn timeout, or until ctx ends; the client itself sends
// nothing). The result is the whole mesh, a reference like any other:
// the adverbs, Slice and Stop work on it, and it travels as an argument.
//
// A name no live mesh has is ErrNotFound; a name of a mesh of another
// actor type is ErrWrongType, and the error names both types. When
// several live meshes share a name (see the package doc, # Names), Lookup
// finds the one spawned first.
func Lookup[T any](ctx context.Context, name string) (*ActorMesh[T], error) {
	want := typeName(reflect.TypeFor[T]())
	fail := func(err error) (*ActorMesh[T], error) {
		return nil, fmt.Errorf("actorrt: Lookup[%s] %q: %w", shortName(want), name, err)
	}
	rt, err := runtimeOf(ctx)
	if err != nil {
		return fail(err)
	}
	if !validName(name) {
		return fail(badName(name))
	}
	w, err := rt.role.registry().lookup(ctx, name)
	if err != nil {
		return fail(err)
	}
	m, err := meshOf[T](rt, w)
	if err != nil {
		return fail(err)
	}
	return m, nil
}

// GetOrSpawn returns the mesh of the job named name, and spawns it at the
// name's first use: a singleton of the job, such as a controller that
// every actor reaches by name (Monarch's get_or_spawn_controller).
//
// The first use spawns one actor of type T, with args for its Init, on
// the client's own proc, owned by the client: it lives as long as the job
// whoever asked for it, and its failures go to the fault hook. It runs in
// the client, not on a proc of its own, because the client is the one
// process that lasts as long as the job, and a spawn there costs no new
// process. Concurrent first uses, from any processes, share one spawn,
// and every caller gets the same mesh; later uses get it without a spawn,
// and their args are checked against Init but not used.
//
// A name that a live mesh of another type holds is ErrWrongType, naming
// both types; a name already held by a mesh of T (spawned by Spawn, say)
// gives that mesh, whatever its size. A first spawn that fails (Init's
// error, the spawn timeout) fails every caller waiting on it, and the
// next use tries again. A proc waits for the client at most the spawn
// timeout and a margin, or until ctx ends.
func GetOrSpawn[T any](ctx context.Context, name string, args ...any) (*ActorMesh[T], error) {
	want := typeName(reflect.TypeFor[T]())
	fail := func(err error) (*ActorMesh[T], error) {
		return nil, fmt.Errorf("actorrt: GetOrSpawn[%s] %q: %w", shortName(want), name, err)
	}
	rt, err := runtimeOf(ctx)
	if err != nil {
		return fail(err)
	}
	at, err := lookupType(reflect.TypeFor[T]())
	if err != nil {
		return fail(err)
	}
	if !validName(name) {
		return fail(badName(name))
	}
	if err := checkInitArgs(at, args); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err) // a caller gone already starts no spawn
	}
	w, err := rt.role.registry().getOrSpawn(ctx, at, name, args)
	if err != nil {
		return fail(err)
	}
	m, err := meshOf[T](rt, w)
	if err != nil {
		return fail(err)
	}
	return m, nil
}

// meshOf makes a registered mesh an *ActorMesh[T] of this process.
func meshOf[T any](rt *core, w actorMeshWire) (*ActorMesh[T], error) {
	if want := typeName(reflect.TypeFor[T]()); w.Type != want {
		return nil, wrongType(w.Name, w.Type, want)
	}
	ref, reg, err := w.bind(rt)
	if err != nil {
		return nil, err
	}
	rt.health.started(ref.procInfos(), false) // hear of the ends of its procs
	return &ActorMesh[T]{ref: ref, reg: reg}, nil
}

func badName(name string) error {
	return fmt.Errorf("%w: name %q: use letters, digits, '_' or '-'", ErrBadArgs, name)
}

// wrongType says that name is a mesh of type has, where want was asked
// for: by their short names, unless those are the same.
func wrongType(name, has, want string) error {
	h, w := shortName(has), shortName(want)
	if h == w {
		h, w = has, want
	}
	return fmt.Errorf("%w: %q is a mesh of %s, not of %s", ErrWrongType, name, h, w)
}

// askClient sends the client op with body and waits for its answer, at
// most d or until ctx ends.
func askClient[R any](ctx context.Context, rt *core, op string, body any, d time.Duration) (R, error) {
	var zero R
	fut := newFuture[R](label{mesh: "the client", method: op})
	port, err := rt.ports.open(&onePort[R]{fut: fut}, []string{jobenv.ClientID})
	if err != nil {
		return zero, err
	}
	defer rt.ports.close(port)
	if err := rt.sendControl(jobenv.ClientID, op, port, body); err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fut.Get(ctx)
}

// nameService is the job's name registry as a process reaches it: the client
// keeps it (clientNames), a proc asks the client (procNames).
type nameService interface {
	lookup(ctx context.Context, name string) (actorMeshWire, error)
	getOrSpawn(ctx context.Context, at *actorType, name string, args []any) (actorMeshWire, error)
	add(ctx context.Context, w actorMeshWire) error
	free(id string)
	// serve answers a proc's request to the registry.
	serve(op string, body any, reply portRef, subject string)
}

// clientNames is the registry in the client, which keeps it.
type clientNames struct{ r *nameRegistry }

func (n clientNames) lookup(_ context.Context, name string) (actorMeshWire, error) {
	return n.r.lookup(name)
}

func (n clientNames) getOrSpawn(ctx context.Context, at *actorType, name string, args []any) (actorMeshWire, error) {
	return n.r.getOrSpawn(ctx, at, name, args)
}

func (n clientNames) add(_ context.Context, w actorMeshWire) error { return n.r.add(w) }
func (n clientNames) free(id string)                               { n.r.free(id) }

// procNames is the registry as a proc reaches it: round trips to the
// client.
type procNames struct{ rt *core }

func (n procNames) lookup(ctx context.Context, name string) (actorMeshWire, error) {
	return askClient[actorMeshWire](ctx, n.rt, wire.OpLookup, &lookupReq{Name: name}, n.rt.opts.spawnTimeout)
}

func (n procNames) getOrSpawn(ctx context.Context, at *actorType, name string, args []any) (actorMeshWire, error) {
	if args == nil {
		args = []any{} // an empty array: a nil one would arrive as no bytes at all
	}
	raw, err := wire.MarshalLimited(args, n.rt.link.MaxMessage(), "Init arguments")
	if err != nil {
		if !errors.Is(err, ErrTooLarge) {
			err = fmt.Errorf("%w: encode: %v", ErrBadArgs, err)
		}
		return actorMeshWire{}, err
	}
	req := &getOrSpawnReq{Name: name, Type: at.name, Args: raw}
	return askClient[actorMeshWire](ctx, n.rt, wire.OpGetOrSpawn, req, n.rt.opts.spawnTimeout+answerMargin)
}

func (n procNames) add(ctx context.Context, w actorMeshWire) error {
	if _, err := askClient[Void](ctx, n.rt, wire.OpNameAdd, &nameAddReq{Mesh: w}, n.rt.opts.spawnTimeout); err != nil {
		return fmt.Errorf("registering the name with the client: %w", err)
	}
	return nil
}

// free needs no answer: what the proc sends the client next (a Spawn's
// registration of the same name) arrives after it.
func (n procNames) free(id string) {
	if err := n.rt.sendControl(jobenv.ClientID, wire.OpNameFree, 0, &nameFreeReq{Mesh: id}); err != nil {
		n.rt.log.Warn().Err(err).Str("mesh", id).Msg("cannot tell the client that a mesh's name is free")
	}
}

func (n procNames) serve(op string, _ any, reply portRef, subject string) {
	err := fmt.Errorf("%s sent to proc %s: the client keeps the job's names", op, n.rt.procID)
	n.rt.drop(wire.DropOp, subject, err)
	if wire.OpReplies(op) {
		n.rt.sendErrorToPort(reply, err)
	}
}

// serve does not block the dispatcher: a first GetOrSpawn waits for its
// spawn on a goroutine of its own.
func (n clientNames) serve(op string, body any, reply portRef, subject string) {
	r, rt := n.r, n.r.rt
	switch b := body.(type) {
	case *nameAddReq:
		answerName(rt, reply, nil, r.add(b.Mesh))
	case *nameFreeReq:
		r.free(b.Mesh)
	case *lookupReq:
		w, err := r.lookup(b.Name)
		answerName(rt, reply, &w, err)
	case *getOrSpawnReq:
		go func() {
			w, err := r.getOrSpawnFor(b)
			answerName(rt, reply, &w, err)
		}()
	}
}

// answerName answers a request to the registry with w (nil: no value) or
// err.
func answerName(rt *core, reply portRef, w *actorMeshWire, err error) {
	if err != nil {
		rt.sendErrorToPort(reply, err)
		return
	}
	rt.sendToPort(reply, 0, func(e *msgpack.Encoder) error {
		if w == nil {
			return e.EncodeNil()
		}
		return e.Encode(w)
	})
}

// The bodies of the registry's ops.

// nameAddReq (wire.OpNameAdd) registers a mesh a proc spawned.
type nameAddReq struct {
	Mesh actorMeshWire `msgpack:"mesh"`
}

// nameFreeReq (wire.OpNameFree) frees the name of a stopped mesh.
type nameFreeReq struct {
	Mesh string `msgpack:"mesh"` // its id
}

// lookupReq (wire.OpLookup) asks for the mesh of a name.
type lookupReq struct {
	Name string `msgpack:"name"`
}

// getOrSpawnReq (wire.OpGetOrSpawn) asks for the mesh of a name, to be
// spawned with Args (Init's arguments, an array) if it has none.
type getOrSpawnReq struct {
	Name string             `msgpack:"name"`
	Type string             `msgpack:"type"`
	Args msgpack.RawMessage `msgpack:"args"`
}

// nameBody is the body of a registry op, for readControl; nil for any
// other op.
func nameBody(op string) any {
	switch op {
	case wire.OpNameAdd:
		return &nameAddReq{}
	case wire.OpNameFree:
		return &nameFreeReq{}
	case wire.OpLookup:
		return &lookupReq{}
	case wire.OpGetOrSpawn:
		return &getOrSpawnReq{}
	}
	return nil
}

func (b *nameAddReq) check() error { return b.Mesh.check() }

func (b *nameFreeReq) check() error {
	if !wire.ValidID(b.Mesh) {
		return fmt.Errorf("mesh id %.40q", b.Mesh)
	}
	return nil
}

func (b *lookupReq) check() error {
	if !validName(b.Name) {
		return fmt.Errorf("name %.40q", b.Name)
	}
	return nil
}

func (b *getOrSpawnReq) check() error {
	if !validName(b.Name) || b.Type == "" || len(b.Args) == 0 {
		return fmt.Errorf("name %.40q, type %.40q, %d bytes of arguments", b.Name, b.Type, len(b.Args))
	}
	return nil
}

// nameRegistry is the client's registry of the job's mesh names. Safe for
// concurrent use.
type nameRegistry struct {
	rt *core
	c  *client // whose registry it is: its view of the job hears of meshes

	mu     sync.Mutex
	byName map[string][]*namedMesh          // the live meshes of each name, oldest first
	byID   map[string]*namedMesh            // the same, by mesh id
	byProc map[string]map[string]*namedMesh // the meshes each proc hosts members of, by id
	firsts map[string]*firstUse             // GetOrSpawn's spawns under way, by name
}

// namedMesh is a registered mesh.
type namedMesh struct {
	w       actorMeshWire // the whole mesh, as a reference travels
	running int           // its procs not stopped yet
}

// firstUse is a GetOrSpawn spawn under way: its callers wait for done.
type firstUse struct {
	typ  *actorType
	done chan struct{}
	w    actorMeshWire // the name's mesh, once done without err
	err  error
}

func newNameRegistry(c *client) *nameRegistry {
	return &nameRegistry{rt: c.core, c: c, byName: map[string][]*namedMesh{}, byID: map[string]*namedMesh{},
		byProc: map[string]map[string]*namedMesh{}, firsts: map[string]*firstUse{}}
}

// add registers a mesh under its name, after those that have it already.
func (r *nameRegistry) add(w actorMeshWire) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[w.ID] != nil {
		return nil // registered already
	}
	if len(r.byID) >= maxNames {
		return fmt.Errorf("the job has %d live meshes, the most the client registers", maxNames)
	}
	procs := uniq(w.Procs)
	nm := &namedMesh{w: w, running: len(procs)}
	r.byName[w.Name] = append(r.byName[w.Name], nm)
	r.byID[w.ID] = nm
	for _, p := range procs {
		if r.byProc[p] == nil {
			r.byProc[p] = map[string]*namedMesh{}
		}
		r.byProc[p][w.ID] = nm
	}
	r.c.feedMeshAdded(w)
	return nil
}

// free forgets a stopped mesh; its name passes to the next mesh that has
// it, if any.
func (r *nameRegistry) free(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freeLocked(id)
}

func (r *nameRegistry) freeLocked(id string) {
	nm := r.byID[id]
	if nm == nil {
		return
	}
	delete(r.byID, id)
	r.c.feedMeshStopped(id)
	list := r.byName[nm.w.Name]
	for i, other := range list {
		if other == nm {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(r.byName, nm.w.Name)
	} else {
		r.byName[nm.w.Name] = list
	}
	for _, p := range nm.w.Procs {
		if ms := r.byProc[p]; ms != nil {
			delete(ms, id)
			if len(ms) == 0 {
				delete(r.byProc, p)
			}
		}
	}
}

// procEnded frees the names of the meshes whose last proc was stopped.
// A proc that failed frees nothing: its meshes keep their names until
// they are stopped.
func (r *nameRegistry) procEnded(n wire.GoneNotice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := r.byProc[n.Proc]
	delete(r.byProc, n.Proc)
	if !n.Stopped {
		return
	}
	for id, nm := range ms {
		if nm.running--; nm.running == 0 {
			r.freeLocked(id)
		}
	}
}

// lookup is the mesh of name.
func (r *nameRegistry) lookup(name string) (actorMeshWire, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if list := r.byName[name]; len(list) > 0 {
		return list[0].w, nil
	}
	return actorMeshWire{}, ErrNotFound
}

// getOrSpawn is the mesh of name, spawned (once, for every caller) if
// there is none. It waits at most the spawn timeout and a margin, or
// until ctx ends.
func (r *nameRegistry) getOrSpawn(ctx context.Context, at *actorType, name string, args []any) (actorMeshWire, error) {
	r.mu.Lock()
	if list := r.byName[name]; len(list) > 0 {
		w := list[0].w
		r.mu.Unlock()
		if w.Type != at.name {
			return actorMeshWire{}, wrongType(name, w.Type, at.name)
		}
		return w, nil
	}
	f := r.firsts[name]
	if f == nil {
		f = &firstUse{typ: at, done: make(chan struct{})}
		r.firsts[name] = f
		go r.spawnFirst(name, f, args)
	}
	r.mu.Unlock()
	if f.typ != at {
		return actorMeshWire{}, wrongType(name, f.typ.name, at.name)
	}
	ctx, cancel := context.WithTimeout(ctx, r.rt.opts.spawnTimeout+answerMargin)
	defer cancel()
	select {
	case <-f.done:
	case <-ctx.Done():
		return actorMeshWire{}, fmt.Errorf("waiting for its spawn: %w", ctx.Err())
	}
	if f.err != nil {
		return actorMeshWire{}, f.err
	}
	if f.w.Type != at.name {
		return actorMeshWire{}, wrongType(name, f.w.Type, at.name)
	}
	return f.w, nil
}

// getOrSpawnFor serves a proc's GetOrSpawn: its arguments are read as
// Init's, so that a bad one is refused before anything is spawned.
func (r *nameRegistry) getOrSpawnFor(req *getOrSpawnReq) (actorMeshWire, error) {
	at, err := lookupTypeName(req.Type)
	if err != nil {
		return actorMeshWire{}, fmt.Errorf("in the client: %w", err)
	}
	var types []reflect.Type
	if at.init != nil {
		types = at.init.args
	}
	vals := make([]reflect.Value, len(types))
	if err := decodeArgs(r.rt, req.Args, false, types, vals); err != nil {
		return actorMeshWire{}, fmt.Errorf("%w: Init arguments: %v", ErrBadArgs, err)
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v.Interface()
	}
	return r.getOrSpawn(r.rt.ctx, at, req.Name, args)
}

// spawnFirst spawns the singleton of a name on the client's proc and
// tells the callers waiting on f. It spawns with the client's own
// context: the singleton is the client's, whoever asked first, and no
// caller's ctx ends a spawn that others wait on.
func (r *nameRegistry) spawnFirst(name string, f *firstUse, args []any) {
	ref, ext, err := spawnMesh(r.rt.ctx, ThisProc(r.rt.ctx), name, f.typ, SpawnOptions{}, args)
	var stray *ActorMesh[Void]
	r.mu.Lock()
	delete(r.firsts, name)
	if err == nil {
		// Spawn registered it, but a Spawn of the same name elsewhere may
		// have come first: the name, and every caller, then get that one.
		if list := r.byName[name]; len(list) == 0 {
			err = fmt.Errorf("%w: the mesh was stopped as it was spawned", ErrStopped)
		} else if f.w = list[0].w; f.w.ID != ref.id {
			stray = &ActorMesh[Void]{ref: ref, reg: wholeRegion(ext)}
		}
	}
	f.err = err
	r.mu.Unlock()
	close(f.done)
	if stray != nil {
		stray.Stop(r.rt.ctx)
	}
}
