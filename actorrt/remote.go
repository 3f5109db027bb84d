package actorrt

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Free remote functions: functions registered by name in every process of
// the program, run on the procs of a ProcMesh without any actor.
//
//	var CheckMemory = actorrt.Remote("check_memory", func(ctx context.Context) (uint64, error) { ... })
//	rss, err := CheckMemory.Call(procs).Get(ctx)
//
// Each proc runs its remote functions one at a time, in arrival order, in
// a system actor of its own.

// remoteFn runs a registered function on decoded arguments.
type remoteFn struct {
	args   []reflect.Type
	invoke func(ctx context.Context, args []reflect.Value) (any, error)
}

var remotes = struct {
	sync.RWMutex
	m map[string]*remoteFn
}{m: map[string]*remoteFn{}}

func registerRemote(name string, fn *remoteFn) error {
	if !validName(name) {
		return fmt.Errorf("%w: remote function name %q: use letters, digits, '_' or '-'", ErrBadArgs, name)
	}
	remotes.Lock()
	defer remotes.Unlock()
	if remotes.m[name] != nil {
		return fmt.Errorf("%w: remote function %q registered twice", ErrNameTaken, name)
	}
	remotes.m[name] = fn
	return nil
}

// registerRemoteFn registers invoke, a function of args returning R, as
// the remote function name (Remote and its numbered forms). Every argument
// type and the result type must travel intact, as Register requires of an
// endpoint's: a function that could not be called as written is refused
// here, at registration, and every later use fails with the reason.
func registerRemoteFn[R any](name string, invoke func(ctx context.Context, args []reflect.Value) (any, error), args ...reflect.Type) error {
	for i, t := range args {
		if err := checkWire(t); err != nil {
			return fmt.Errorf("%w: remote function %q: argument %d (%s): %v", ErrBadEndpoint, name, i+1, t, err)
		}
	}
	r := reflect.TypeFor[R]()
	if err := checkWire(r); err != nil {
		return fmt.Errorf("%w: remote function %q: result %s: %v", ErrBadEndpoint, name, r, err)
	}
	return registerRemote(name, &remoteFn{args: args, invoke: invoke})
}

// broadcastRemote runs name on every proc of procs with no reply port.
func broadcastRemote(procs *ProcMesh, name string, regErr error, args []any) error {
	rt, err := remoteTarget(procs, name, regErr)
	if err != nil {
		return err
	}
	return rt.runRemote(procs, name, args, portRef{})
}

// remoteTarget checks a remote call: the function registered, the procs
// usable, the runtime started.
func remoteTarget(procs *ProcMesh, name string, regErr error) (*core, error) {
	switch {
	case regErr != nil:
		return nil, regErr
	case procs == nil:
		return nil, fmt.Errorf("actorrt: remote %s on a nil ProcMesh", name)
	}
	return procs.runtime()
}

func callRemote[R any](procs *ProcMesh, name string, regErr error, args []any) *Future[ValueMesh[R]] {
	what := label{mesh: "remote " + name}
	rt, err := remoteTarget(procs, name, regErr)
	if err != nil {
		return failedFuture[ValueMesh[R]](what, err)
	}
	fut := newFuture[ValueMesh[R]](what)
	id, err := rt.ports.open(newCallPort[R](fut, procs.Extent()), procs.ids())
	if err == nil {
		if err = rt.runRemote(procs, name, args, portRef{proc: rt.procID, id: id}); err != nil {
			rt.ports.close(id)
		}
	}
	if err != nil {
		fut.resolve(ValueMesh[R]{}, err)
	}
	return fut
}

func sendRemote(procs *ProcMesh, name string, regErr error, port portRef, args []any) error {
	rt, err := remoteTarget(procs, name, regErr)
	if err != nil {
		return err
	}
	if port.zero() {
		return fmt.Errorf("%w: Send to the zero Port (open one with OpenChannel)", ErrBadArgs)
	}
	return rt.runRemote(procs, name, args, port)
}

// runRemote asks the system actor of every proc of procs to run name; each
// answers on reply with its rank in procs.
func (rt *core) runRemote(procs *ProcMesh, name string, args []any, reply portRef) error {
	if args == nil {
		args = []any{} // an empty array, not nil: nil would arrive as no bytes at all
	}
	raw, err := wire.MarshalLimited(args, rt.link.MaxMessage(), "remote "+name+" arguments")
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return err
		}
		return fmt.Errorf("%w: remote %s: %v", ErrBadArgs, name, err)
	}
	for v := 0; v < procs.reg.numRanks(); v++ {
		p := procs.proc(procs.reg.baseRank(v))
		if err := rt.health.goneErr(p.ID); err != nil {
			if rt.sup.replacing(p.ID) {
				err = fmt.Errorf("%w; a restart policy is starting a proc in its place (the slot's next incarnation), which a call made once it is ready reaches", err)
			}
			return fmt.Errorf("actorrt: remote %s on %v: %w", name, procs.reg.extent().point(v), err)
		}
		h := wire.Header{Kind: wire.KindActor, Target: sysMesh, Method: "Run", Port: reply.id, ReplyTo: reply.proc, Rank: v}
		w := wire.NewPayload(&h, rt.link.MaxMessage())
		err = w.Enc.EncodeMulti([]any{name, msgpack.RawMessage(raw)})
		if tl := w.TooLarge("remote "+name+" arguments", err); tl != nil {
			err = tl
		}
		if err == nil {
			err = rt.delivery.Send(w, &h, rt.delivery.ToProc(p.ID))
		}
		w.Free()
		if err != nil {
			return fmt.Errorf("actorrt: remote %s: %w", name, err)
		}
	}
	return nil
}

// sysMesh is the id of every proc's system actor, reached on the proc's
// own subject.
const sysMesh = "sys"

// procService is the system actor: it runs remote functions.
type procService struct{}

// Run runs the remote function name on args (an encoded argument list).
func (procService) Run(ctx *Context, name string, args msgpack.RawMessage) (msgpack.RawMessage, error) {
	remotes.RLock()
	fn := remotes.m[name]
	remotes.RUnlock()
	if fn == nil {
		return nil, fmt.Errorf("%w: no remote function %q in this program (register it with actorrt.Remote in a package-level var)", ErrBadEndpoint, name)
	}
	in := make([]reflect.Value, len(fn.args))
	rt := ctx.actor.mesh.rt
	if err := decodeArgs(rt, args, false, fn.args, in); err != nil {
		return nil, fmt.Errorf("%w: remote %s: %v", ErrDecode, name, err)
	}
	v, err := fn.invoke(ctx, in)
	if err != nil {
		return nil, err
	}
	return wire.MarshalLimited(v, rt.link.MaxMessage(), "the result of remote "+name)
}

// startSystemActor makes the proc's system actor, a mesh of one reached
// on the proc's subject.
func (la *localActors) startSystemActor() error {
	at, err := inspect(reflect.TypeFor[procService]())
	if err != nil {
		return err
	}
	la.startSystemMesh(sysMesh, "proc:"+la.rt.procID, at)
	return nil
}

// startSystemMesh starts a system actor of type at: a mesh of one, mesh
// id id, reached on the proc's subject.
func (la *localActors) startSystemMesh(id, name string, at *actorType) {
	whole := wholeRegion(Extent{})
	lm := &localMesh{rt: la.rt, id: id, name: name, typ: at, base: Extent{}, whole: &whole}
	a := newActor(lm, 0)
	lm.members.Store(&[]*actor{a})
	go a.run()
	la.mu.Lock()
	la.meshes[id] = lm
	la.publish()
	la.mu.Unlock()
}
