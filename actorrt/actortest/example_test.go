package actortest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/actortest"
)

// A mesh of counters on 2 simulated hosts x 4 procs, called as a real
// job calls it.
func Example() {
	c, err := actortest.New(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}})
	if err != nil {
		fmt.Println(err)
		return
	}
	mesh, err := counters.Spawn(ctx, procs, "counters", 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	add.Broadcast(mesh.Slice("hosts", 1, 2), 5)
	values, err := value.Call(mesh).Get(ctx)
	fmt.Println(values.Extent(), values.Values(), err)
	// Output:
	// {hosts: 2, gpus: 4} [10 10 10 10 15 15 15 15] <nil>
}

// A proc killed under a mesh with a restart policy: its member comes
// back, on a new proc, with the state its Init gives.
func ExampleCluster_Kill() {
	c, err := actortest.New(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	policy := actorrt.DefaultRestartPolicy()
	mesh, err := actorrt.SpawnWith[Counter](ctx, procs, "counters", actorrt.SpawnOptions{Restart: &policy}, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	add.Call(mesh, 1).Get(ctx)
	fmt.Println(c.Kill(procs.Slice("hosts", 1, 2).Slice("gpus", 0, 1)))
	for {
		values, err := value.Call(mesh).Get(ctx)
		if err == nil {
			fmt.Println(values.Values())
			break
		}
		if ctx.Err() != nil {
			fmt.Println(err)
			break
		}
	}
	// Output:
	// <nil>
	// [1 1 0 1]
}
