package main

import (
	"context"
	"fmt"

	"github.com/monarch-go/monarch/actorrt"
)

// ContextAwareActor tells its own rank and the message's rank apart.
type ContextAwareActor struct{}

func (c *ContextAwareActor) GetContextInfo(ctx *actorrt.Context) (string, error) {
	actor := ctx.ActorInstance()
	return fmt.Sprintf("Actor rank: %v, message rank: %v (%s in mesh %s%v, proc %s)",
		actor.Rank(), ctx.MessageRank(), actor.ID(), actor.MeshName(), actor.MeshExtent(), actor.Proc()), nil
}

// actorContext: Actor Context. The call goes to a slice, so message ranks
// differ from actor ranks.
func actorContext(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("Actor context")
	c, err := actorrt.Spawn[ContextAwareActor](ctx, trainerProcs, "context_actor")
	if err != nil {
		return err
	}
	infos, err := actorrt.Method((*ContextAwareActor).GetContextInfo).Call(c.Slice("gpus", 2, 4)).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(infos)
	return nil
}
