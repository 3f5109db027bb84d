package main

import (
	"context"
	"fmt"
	"log"

	"github.com/monarch-go/monarch/actorrt"
)

type Counter struct{ value int }

func (c *Counter) Init(ctx *actorrt.Context, initial int) error { c.value = initial; return nil }
func (c *Counter) Increment(ctx *actorrt.Context) error         { c.value++; return nil }
func (c *Counter) GetValue(ctx *actorrt.Context) (int, error)   { return c.value, nil }

// Endpoints, bound once: their methods are the adverbs.
var (
	increment = actorrt.VoidMethod((*Counter).Increment)
	getValue  = actorrt.Method((*Counter).GetValue)
)

func main() {
	if err := actorrt.Register[Counter](); err != nil { // in every process: procs run this binary too
		log.Fatal(err)
	}
	actorrt.Main(func(ctx context.Context) error {
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 8}})
		if err != nil {
			return err
		}
		counters, err := actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "counters", 0)
		if err != nil {
			return err
		}
		if err := increment.Broadcast(counters); err != nil {
			return err
		}
		if err := increment.Broadcast(counters.Slice("gpus", 0, 4)); err != nil {
			return err
		}
		values, err := getValue.Call(counters).Get(ctx)
		if err != nil {
			return err
		}
		fmt.Println(values) // ValueMesh{gpus: 8} [2 2 2 2 1 1 1 1]
		return nil
	})
}
