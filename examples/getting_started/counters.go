package main

import (
	"context"
	"fmt"

	"github.com/monarch-go/monarch/actorrt"
)

// Counter is the guide's first actor.
type Counter struct{ value int }

func (c *Counter) Init(ctx *actorrt.Context, initial int) error { c.value = initial; return nil }
func (c *Counter) Increment(ctx *actorrt.Context) error         { c.value++; return nil }
func (c *Counter) GetValue(ctx *actorrt.Context) (int, error)   { return c.value, nil }

// The Counter's endpoints, bound once; their methods are the adverbs.
var (
	increment = actorrt.VoidMethod((*Counter).Increment)
	getValue  = actorrt.Method((*Counter).GetValue)
)

// counters: Defining an Actor, Spawning An Actor In The Local Process,
// Sending A Simple Message, Multiple Actors at Once, Broadcasting Messages,
// Slicing Meshes.
func counters(ctx context.Context) error {
	heading("Spawning an actor in the local process")
	counter, err := actorrt.Init1((*Counter).Init).Spawn(ctx, actorrt.ThisProc(ctx), "counter", 0)
	if err != nil {
		return err
	}

	heading("Sending a simple message")
	value, err := getValue.CallOne(counter).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("Counter value: %d\n", value)

	heading("Multiple actors at once")
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 8}})
	if err != nil {
		return err
	}
	defer procs.Stop(ctx)
	counters, err := actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "counters", 0)
	if err != nil {
		return err
	}
	fmt.Printf("Process mesh extent: %v\n", procs.Extent())

	heading("Broadcasting messages")
	if err := increment.Broadcast(counters); err != nil {
		return err
	}

	heading("Slicing meshes")
	if err := increment.Broadcast(counters.Slice("gpus", 0, 4)); err != nil {
		return err
	}
	values, err := getValue.Call(counters).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(values)
	return nil
}
