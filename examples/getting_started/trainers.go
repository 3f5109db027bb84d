package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/monarch-go/monarch/actorrt"
)

// Trainer reports where a message found it.
type Trainer struct{}

func (t *Trainer) Step(ctx *actorrt.Context) (string, error) {
	return fmt.Sprintf("Trainer %v taking a step.", ctx.MessageRank()), nil
}

// trainers: Multiple Hosts. The hosts come from the job's config (run with
// `monarch run job.toml`, or MONARCH_HOSTS naming a local hosts file);
// without one, this host. It returns the trainer procs, which the later
// sections use.
func trainers(ctx context.Context) (*actorrt.ProcMesh, error) {
	heading("Multiple hosts")
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if errors.Is(err, actorrt.ErrNoHostsConfig) {
		fmt.Println("(no hosts configured: using this host)")
		hosts, err = actorrt.ThisHost(ctx), nil
	}
	if err != nil {
		return nil, err
	}
	fmt.Printf("Host mesh extent: %v\n", hosts.Extent())
	trainerProcs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}})
	if err != nil {
		return nil, err
	}
	fmt.Printf("Process mesh extent: %v\n", trainerProcs.Extent())
	trainers, err := actorrt.Spawn[Trainer](ctx, trainerProcs, "trainer")
	if err != nil {
		return nil, err
	}
	steps, err := actorrt.Method((*Trainer).Step).Call(trainers).Get(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Println(steps)
	return trainerProcs, nil
}
