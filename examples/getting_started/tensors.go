package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
	"gorgonia.org/tensor"
)

// LinearActor holds a weight matrix and applies it to its proc's shard.
type LinearActor struct{ w *tensor.Dense }

func (l *LinearActor) Init(ctx *actorrt.Context) error {
	r := rand.New(rand.NewPCG(3, uint64(ctx.ActorInstance().Rank().Rank())))
	data := make([]float64, 4*4)
	for i := range data {
		data[i] = r.Float64()*2 - 1
	}
	l.w = tensor.New(tensor.WithShape(4, 4), tensor.WithBacking(data))
	return nil
}

// Forward is input @ w.
func (l *LinearActor) Forward(ctx *actorrt.Context, input dtensor.Shard) (dtensor.Shard, error) {
	out, err := tensor.MatMul(input.T, l.w)
	if err != nil {
		return dtensor.Shard{}, err
	}
	return dtensor.NewShard(out.(*tensor.Dense)), nil
}

// forward is Forward as an rref endpoint: the propagate function says the
// output has the input's shape (input @ a square matrix).
var forward = dtensor.Endpoint("getting_started.forward", (*LinearActor).Forward,
	func(in tensor.Shape) tensor.Shape { return in })

// StepWith takes a step with the shard of a distributed tensor on its own
// proc.
func (t *DataTrainer) StepWith(ctx *actorrt.Context, input dtensor.Shard) (string, error) {
	return fmt.Sprintf("Step with input %v", input.T.Data()), nil
}

// tensors: Distributed Tensors.
func tensors(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("Distributed tensors")
	mesh := dtensor.Activate(trainerProcs)
	t, err := mesh.Rand(3, 4)
	if err != nil {
		return err
	}
	fmt.Println(t)
	first := trainerProcs.Extent().Points()
	one, err := dtensor.FetchShard(ctx, t, first[0])
	if err != nil {
		return err
	}
	two, err := dtensor.FetchShard(ctx, t, first[1])
	if err != nil {
		return err
	}
	fmt.Printf("one %v\n%v\ntwo %v\n%v\n", first[0], one, first[1], two)

	tt, err := t.T()
	if err != nil {
		return err
	}
	dist, err := t.MatMul(tt)
	if err != nil {
		return err
	}
	d0, err := dtensor.FetchShard(ctx, dist, first[0])
	if err != nil {
		return err
	}
	fmt.Printf("dist %v\n%v\n", first[0], d0)

	// Each trainer receives the shard on its own proc.
	loaders, err := actorrt.Spawn[DataLoader](ctx, trainerProcs, "tensor_loaders")
	if err != nil {
		return err
	}
	dtrainers, err := actorrt.Init1((*DataTrainer).Init).Spawn(ctx, trainerProcs, "tensor_trainers", loaders)
	if err != nil {
		return err
	}
	row, err := dist.Row(0)
	if err != nil {
		return err
	}
	steps, err := actorrt.Method1((*DataTrainer).StepWith).Call(dtrainers, row.Shard()).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(steps)

	// Actors define their own distributed tensors with the rref adverb.
	linear, err := actorrt.Spawn[LinearActor](ctx, trainerProcs, "linear")
	if err != nil {
		return err
	}
	y, err := forward.RRef(linear, t)
	if err != nil {
		return err
	}
	o, err := y.Relu()
	if err != nil {
		return err
	}
	o0, err := dtensor.FetchShard(ctx, o, first[0])
	if err != nil {
		return err
	}
	fmt.Printf("relu(linear.forward.rref(t)) %v %v\n%v\n", first[0], o.Shape(), o0)
	return nil
}
