package main

import (
	"context"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Train prints a few steps of training, as user code does: to its own
// proc's stdout.
func (t *Trainer) Train(ctx *actorrt.Context, steps int) error {
	r := ctx.ActorInstance().Rank().Rank()
	for s := 0; s < steps; s++ {
		fmt.Printf("step %d loss=%.3f\n", s, 1/float64(s+r+1))
	}
	return nil
}

// logging: Logging. Every proc's output is streamed to the client; with a
// window, similar lines are collapsed into one line with a count.
func logging(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("Logging")
	if err := trainerProcs.SetLogOptions(ctx, actorrt.LogOptions{StreamToClient: true, AggregateWindow: 3 * time.Second}); err != nil {
		return err
	}
	trainers, err := actorrt.Spawn[Trainer](ctx, trainerProcs, "logging_trainers")
	if err != nil {
		return err
	}
	if _, err := actorrt.VoidMethod1((*Trainer).Train).Call(trainers, 5).Get(ctx); err != nil {
		return err
	}
	// Back to raw lines; the lines of the window so far are printed first.
	return trainerProcs.SetLogOptions(ctx, actorrt.LogOptions{StreamToClient: true})
}
