package main

// INSPECT_WORK=block: every worker blocks.

import (
	"context"
	"fmt"
	"os"

	"github.com/monarch-go/monarch/actorrt"
)

// Blocker blocks in a function with a name no other stack has.
type Blocker struct{}

// Block blocks until the actor stops (its context ends).
func (b *Blocker) Block(ctx *actorrt.Context) error {
	fmt.Printf("blocking in stacksTestBlockHere pid=%d\n", os.Getpid())
	stacksTestBlockHere(ctx)
	return nil
}

//go:noinline
func stacksTestBlockHere(ctx context.Context) {
	<-ctx.Done()
}

// Wait (concurrent) blocks until the actor stops, in a function of its own.
func (b *Blocker) Wait(ctx *actorrt.Context) error {
	stacksTestWaitHere(ctx)
	return nil
}

//go:noinline
func stacksTestWaitHere(ctx context.Context) {
	<-ctx.Done()
}

// block sends Wait twice, then Block, to every blocker and prints READY:
// each blocker runs two concurrent calls and one of its mailbox.
func block(ctx context.Context, procs *actorrt.ProcMesh) error {
	b, err := actorrt.Spawn[Blocker](ctx, procs, "blockers")
	if err != nil {
		return err
	}
	for range 2 {
		if err := actorrt.VoidMethod((*Blocker).Wait).Broadcast(b); err != nil {
			return err
		}
	}
	if err := actorrt.VoidMethod((*Blocker).Block).Broadcast(b); err != nil {
		return err
	}
	fmt.Println("READY")
	<-ctx.Done()
	return nil
}
