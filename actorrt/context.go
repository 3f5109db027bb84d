package actorrt

import "context"

// Context is what an endpoint receives first: the actor's own context (it
// is done when the actor stops) and where the actor and the message are.
// It implements context.Context. A Context is valid during the endpoint
// call only; do not keep it after the method returns.
type Context struct {
	context.Context
	actor  *actor
	view   *region // the region the message was sent to; nil for Init
	msgIdx int     // the actor's rank within view
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
