package actorrt

import (
	"context"
	"fmt"
	"reflect"

	"github.com/monarch-go/monarch/internal/wire"
)

// Context is what an endpoint receives first: the actor's own context (it
// is done when the actor stops) and where the actor and the message are.
// It implements context.Context. A Context is valid during the endpoint
// call only; do not keep it after the method returns (the actor's next
// call reuses it; a concurrent endpoint's call and a function started with
// Go have one of their own). A context derived from it stays valid: it
// depends on the actor's own context only.
type Context struct {
	context.Context
	actor  *actor
	view   *region // the region the message was sent to; nil for Init
	msgIdx int     // the actor's rank within view
	reply  portRef // where the answer goes
	method *method // the endpoint called; nil in Supervise
}

// actorKey is the context key of the actor whose endpoint a context is.
type actorKey struct{}

// actorOf is the actor whose endpoint ctx is, or is derived from; nil for
// a context of the client (or of no actor).
func actorOf(ctx context.Context) *actor {
	if c, ok := ctx.(*Context); ok {
		return c.actor
	}
	a, _ := ctx.Value(actorKey{}).(*actor)
	return a
}

// ActorInstance describes the actor running the current endpoint.
func (c *Context) ActorInstance() *ActorInstance { return &ActorInstance{a: c.actor} }

// MessageRank is the actor's position within the (possibly sliced) mesh
// the message was sent to. It differs from ActorInstance().Rank() when the
// message went to a slice: in counters.Slice("gpus", 4, 8), the actor at
// gpus=5 has message rank {gpus: 1}. In Init it equals the actor's rank.
func (c *Context) MessageRank() Point {
	if c.view == nil {
		return c.actor.rank
	}
	return c.view.extent().point(c.msgIdx)
}

// ActorInstance is the running actor, as seen from its own endpoints.
type ActorInstance struct{ a *actor }

// Rank is the actor's position in the mesh it was spawned as.
func (i *ActorInstance) Rank() Point { return i.a.rank }

// ID names the actor: mesh name and rank, as "counters[3]".
func (i *ActorInstance) ID() string { return i.a.id }

// Proc is the id of the proc the actor runs in.
func (i *ActorInstance) Proc() string { return i.a.mesh.rt.procID }

// Host is the name of the host the actor runs on.
func (i *ActorInstance) Host() string { return i.a.mesh.rt.hostname }

// MeshName is the name the actor's mesh was spawned with.
func (i *ActorInstance) MeshName() string { return i.a.mesh.name }

// MeshExtent is the extent of the whole mesh the actor belongs to.
func (i *ActorInstance) MeshExtent() Extent { return i.a.mesh.base }

// String prints the actor as "counters[3] {gpus: 3} on proc c-4 (host)".
func (i *ActorInstance) String() string {
	return fmt.Sprintf("%s %v on proc %s (%s)", i.a.id, i.a.rank, i.Proc(), i.Host())
}

// MyMesh is the whole mesh the running actor belongs to, as a reference
// it can message (its siblings, or itself with SliceAt(Rank())). It fails
// if A is not the actor's type. The first call in a proc asks the mesh's
// owner where the members are (a proc is told only of its own): it
// waits, at most the spawn timeout or until ctx ends.
func MyMesh[A any](ctx *Context) (*ActorMesh[A], error) {
	lm := ctx.actor.mesh
	if want := typeName(reflect.TypeFor[A]()); want != lm.typ.name {
		return nil, fmt.Errorf("%w: MyMesh[%s] in an actor of %s", ErrBadArgs, shortName(want), lm.typ.name)
	}
	if isSystemMesh(lm.id) {
		return nil, fmt.Errorf("%w: the system actor has no mesh", ErrBadArgs)
	}
	info, err := lm.memberInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("actorrt: MyMesh: %w", err)
	}
	rt := lm.rt
	ref := &meshRef{rt: rt, id: lm.id, name: lm.name, typ: lm.typ, subject: rt.subjects.Mesh(lm.id), procs: info.Procs, agents: info.Agents, all: uniq(info.Procs),
		owner: lm.owner, restartable: lm.restarts}
	if mv := movesOf(info.Moved); mv != nil {
		ref.moves.Store(mv)
	}
	rt.health.started(ref.procInfos(), false)
	return &ActorMesh[A]{ref: ref, reg: *lm.whole}, nil
}

// memberInfo is where the mesh's members are, asked of its owner once.
func (lm *localMesh) memberInfo(ctx context.Context) (*meshInfo, error) {
	lm.infoMu.Lock()
	defer lm.infoMu.Unlock()
	if lm.info != nil {
		return lm.info, nil
	}
	rt := lm.rt
	fut := newFuture[meshInfo](label{mesh: lm.name, method: "where are the members"})
	id, err := rt.ports.open(&onePort[meshInfo]{fut: fut}, []string{lm.owner})
	if err != nil {
		return nil, err
	}
	defer rt.ports.close(id)
	if err := rt.sendControl(lm.owner, wire.OpMeshInfo, id, &meshInfoReq{Mesh: lm.id}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, rt.opts.spawnTimeout)
	defer cancel()
	info, err := fut.Get(ctx)
	if err != nil {
		return nil, err
	}
	if len(info.Procs) != lm.base.NumRanks() || len(info.Agents) != len(info.Procs) {
		return nil, fmt.Errorf("%w: mesh %s: %d procs and %d agents for %v", ErrDecode, lm.name, len(info.Procs), len(info.Agents), lm.base)
	}
	for i := range info.Procs {
		if err := checkProcRef(info.Procs[i], info.Agents[i]); err != nil {
			return nil, err
		}
	}
	if err := checkMoved(info.Moved, len(info.Procs)); err != nil {
		return nil, err
	}
	lm.info = &info
	return lm.info, nil
}
