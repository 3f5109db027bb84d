package actorrt

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/monarch-go/monarch/internal/wire"
)

// Supervision. Every actor mesh has one owner: the actor whose endpoint (or
// Supervise) spawned it, or else the client. When a member fails (an
// endpoint error or panic that no caller waits for, or the end of its
// proc) the owner hears of it as a *MeshFailure:
//
//   - an owner actor with a method Supervise(ctx *Context, f *MeshFailure)
//     bool gets it in its mailbox; true means handled, false means the owner
//     fails too, and its own owner hears of that;
//   - an owner actor without Supervise fails too (nothing goes unreported);
//   - the client calls its fault hook (WithFaultHook).
//
// A failed actor answers every later call with ErrActorFailed, and the
// meshes it owned are stopped. Ownership never moves: a failure on a slice,
// or on a mesh passed to another actor, goes to the mesh's creator.

// MeshFailure reports a failed member of an actor mesh.
type MeshFailure struct {
	Mesh    string      `msgpack:"mesh"`   // the mesh's name
	MeshID  string      `msgpack:"id"`     // the mesh's id
	ActorID string      `msgpack:"actor"`  // the failed member, as mesh[rank]
	Proc    string      `msgpack:"proc"`   // its proc
	Reason  string      `msgpack:"reason"` // what happened
	Dims    Dims        `msgpack:"dims"`   // the mesh's extent
	Coords  []int       `msgpack:"coords"` // the member's rank, per dimension
	Base    int         `msgpack:"base"`   // the member's row-major rank
	Err     *ActorError `msgpack:"err"`    // the endpoint's error or panic, if that was the cause
}

// Rank is the failed member's rank in its mesh.
func (f *MeshFailure) Rank() Point {
	ext, err := NewExtent(f.Dims)
	if err != nil || len(f.Coords) != len(ext.dims) {
		return Point{}
	}
	return Point{ext: ext, coords: f.Coords}
}

// Error describes the failure; a MeshFailure is an error, so a hook can
// return it as is.
func (f *MeshFailure) Error() string {
	return fmt.Sprintf("mesh %s: actor %s %v on proc %s failed: %s", f.Mesh, f.ActorID, f.Rank(), f.Proc, f.Reason)
}

func (f *MeshFailure) String() string { return f.Error() }

// WithFaultHook sets the client's fault hook: it is called, once per
// failure, for every MeshFailure that reaches the client: a failure of a
// mesh the client owns, or one no owner handled. Returning nil ignores
// the failure; returning an error means it is unhandled: the client
// prints it to stderr, stops every proc it started and exits with status
// 1. The default hook returns the failure; a nil hook ignores every
// failure. The hook runs on a goroutine of its own, one failure at a
// time.
func WithFaultHook(hook func(*MeshFailure) error) Option {
	return func(o *options) error {
		if hook == nil {
			hook = func(*MeshFailure) error { return nil }
		}
		o.faultHook = hook
		return nil
	}
}

func defaultFaultHook(f *MeshFailure) error { return f }

// ownership is the owner's record of a mesh it spawned.
type ownership struct {
	ref   *meshRef
	base  Extent
	owner *actor // nil: owned by the proc itself (the client, or a goroutine of a worker)

	mu       sync.Mutex
	reported map[int]bool // members whose failure was already delivered
}

// own records that this proc owns ref, and owner (nil: the proc itself).
func (rt *runtimeT) own(ref *meshRef, base Extent, owner *actor) *ownership {
	o := &ownership{ref: ref, base: base, owner: owner, reported: map[int]bool{}}
	rt.owned.Store(ref.id, o)
	return o
}

// reportFailure sends f to the proc that owns its mesh.
func (rt *runtimeT) reportFailure(ownerProc string, f *MeshFailure) {
	if ownerProc == rt.procID || ownerProc == "" {
		rt.handleFailure(f)
		return
	}
	if err := rt.sendControl(ownerProc, wire.OpFailure, 0, f); err != nil {
		rt.log.Error().Err(err).Str("failure", f.Error()).Msg("cannot report a failure to its owner")
	}
}

// handleFailure gives a failure of a mesh owned here to its owner: the
// owner actor's Supervise, or the client's hook. A failure of a mesh not
// owned here (an escalation from a worker) goes to the client's hook.
func (rt *runtimeT) handleFailure(f *MeshFailure) {
	v, ok := rt.owned.Load(f.MeshID)
	if ok {
		o := v.(*ownership)
		o.mu.Lock()
		dup := o.reported[f.Base]
		o.reported[f.Base] = true
		o.mu.Unlock()
		if dup || o.ref.stopped.Load() {
			return
		}
		if o.owner != nil && o.owner.alive() {
			o.owner.enqueue(envelope{failure: f})
			return
		}
	}
	if rt.procID != clientProcID {
		// Owned by this proc rather than an actor, or by an actor that is
		// gone: the root decides.
		rt.sendControl(clientProcID, wire.OpFailure, 0, f)
		return
	}
	rt.unhandled(f)
}

// unhandled passes f to the client's fault hook, in order, off the
// dispatcher.
func (rt *runtimeT) unhandled(f *MeshFailure) {
	select {
	case rt.faults <- f:
	default:
		// The hook is far behind; this failure is not lost: it is fatal.
		rt.fatal(fmt.Errorf("actorrt: too many unhandled failures; the last: %w", f))
	}
}

// hookLoop runs the fault hook for each failure that reaches the client.
func (rt *runtimeT) hookLoop() {
	for {
		select {
		case f := <-rt.faults:
			if err := callHook(rt.opts.faultHook, f); err != nil {
				rt.fatal(err)
			}
		case <-rt.ctx.Done():
			return
		}
	}
}

func callHook(hook func(*MeshFailure) error, f *MeshFailure) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the fault hook panicked: %v (on %w)", r, f)
		}
	}()
	return hook(f)
}

// fatal ends the client: Main prints err and exits 1.
func (rt *runtimeT) fatal(err error) {
	rt.fatalOnce.Do(func() {
		rt.fatalErr = err
		close(rt.fatalCh)
	})
}

// failuresOnProc reports every member of the meshes owned here that lived
// on a proc that ended.
func (rt *runtimeT) failuresOnProc(n wire.GoneNotice) {
	if n.Stopped {
		return
	}
	rt.owned.Range(func(_, v any) bool {
		o := v.(*ownership)
		if o.ref.stopped.Load() {
			return true
		}
		for b, p := range o.ref.procs {
			if p == n.Proc {
				pt := o.base.point(b)
				rt.handleFailure(&MeshFailure{
					Mesh: o.ref.name, MeshID: o.ref.id, ActorID: o.ref.name + "[" + strconv.Itoa(b) + "]",
					Proc: p, Reason: "its proc ended: " + n.Reason, Dims: o.base.dims, Coords: pt.coords, Base: b,
				})
			}
		}
		return true
	})
}

// printUnhandled is how the client reports a failure nobody handled.
func printUnhandled(err error) {
	fmt.Fprintf(os.Stderr, "monarch: unhandled failure: %v\n", err)
}

// stopOwnedBy stops the meshes actor a owns: they die with their owner.
func (rt *runtimeT) stopOwnedBy(a *actor) {
	rt.owned.Range(func(_, v any) bool {
		o := v.(*ownership)
		if o.owner == a && !o.ref.stopped.Swap(true) {
			stopOn(rt, o.ref.id, o.ref.all)
		}
		return true
	})
}
