package main

import (
	"context"
	"fmt"

	"github.com/monarch-go/monarch/actorrt"
)

// Trainer reports where a message found it.
type Trainer struct{}

func (t *Trainer) Step(ctx *actorrt.Context) (string, error) {
	return fmt.Sprintf("Trainer %v taking a step.", ctx.MessageRank()), nil
}

// trainers: the trainer of Multiple Hosts, on this host. It returns the
// trainer procs, which the later sections use.
func trainers(ctx context.Context) (*actorrt.ProcMesh, error) {
	heading("Trainers")
	trainerProcs, err := actorrt.ThisHost().SpawnProcs(actorrt.Dims{{"gpus", 4}})
	if err != nil {
		return nil, err
	}
	fmt.Printf("Process mesh extent: %v\n", trainerProcs.Extent())
	trainers, err := actorrt.Spawn[Trainer](trainerProcs, "trainer")
	if err != nil {
		return nil, err
	}
	steps, err := actorrt.Call(trainers, (*Trainer).Step).Get(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Println(steps)
	return trainerProcs, nil
}
