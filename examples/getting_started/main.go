// Command getting_started walks through the getting-started guide, section
// by section, and prints what each one shows.
//
//	go run ./examples/getting_started      (or: make run)
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/monarch-go/monarch/actorrt"
)

func main() {
	for _, err := range []error{
		actorrt.Register[Counter](),
		actorrt.Register[Trainer](),
		actorrt.Register[DataLoader](),
		actorrt.Register[DataTrainer](),
		actorrt.Register[ContextAwareActor](),
		actorrt.Register[Recorder](),
		actorrt.Register[InferenceEngine](),
		actorrt.Register[Errorful](),
		actorrt.Register[SupervisorActor](),
		actorrt.Register[ParameterServer](),
		actorrt.Register[Worker](),
		actorrt.Register[LinearActor](),
	} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	actorrt.Main(run, actorrt.WithFaultHook(unhandled))
}

// run runs the sections in the guide's order. Trainer procs are shared by
// the later sections, as in the guide.
func run(ctx context.Context) error {
	if err := counters(ctx); err != nil {
		return err
	}
	trainerProcs, err := trainers(ctx)
	if err != nil {
		return err
	}
	for _, section := range []func(context.Context, *actorrt.ProcMesh) error{
		logging,
		references,
		supervision,
		rdma,
		tensors,
		actorContext,
		remoteFunctions,
		channels,
		ordering,
		outOfOrder,
	} {
		if err := section(ctx, trainerProcs); err != nil {
			return err
		}
	}
	return nil
}

func heading(s string) { fmt.Printf("\n== %s\n", s) }
