package main

import (
	"context"
	"fmt"

	"github.com/monarch-go/monarch/actorrt"
)

// DataLoader hands out examples.
type DataLoader struct{ i int }

func (d *DataLoader) Example(ctx *actorrt.Context) (string, error) {
	d.i++
	return fmt.Sprintf("<data %d from loader %v>", d.i, ctx.ActorInstance().Rank()), nil
}

// DataTrainer gets the whole mesh of data loaders and keeps the one at its
// own rank.
type DataTrainer struct {
	dataloader *actorrt.ActorMesh[DataLoader]
}

func (t *DataTrainer) Init(ctx *actorrt.Context, dataloaders *actorrt.ActorMesh[DataLoader]) error {
	t.dataloader = dataloaders.SliceAt(ctx.ActorInstance().Rank())
	return t.dataloader.Err()
}

func (t *DataTrainer) Step(ctx *actorrt.Context, input string) (string, error) {
	data, err := actorrt.Method((*DataLoader).Example).CallOne(t.dataloader).Get(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Step with data %s and input = %s", data, input), nil
}

// references: Actor and Process References.
func references(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("Actor and process references")
	dataloaders, err := actorrt.Spawn[DataLoader](ctx, trainerProcs, "dataloader")
	if err != nil {
		return err
	}
	dtrainers, err := actorrt.Init1((*DataTrainer).Init).Spawn(ctx, trainerProcs, "dtrainers", dataloaders)
	if err != nil {
		return err
	}
	steps, err := actorrt.Method1((*DataTrainer).Step).Call(dtrainers, "none").Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(steps)
	return nil
}
