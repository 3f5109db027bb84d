// Command multihost is the guide's "Multiple Hosts" section: the job's
// hosts come from its config (actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")),
// trainers run on every host, and each reports where it runs and the
// torchrun variables it was given.
//
//	monarch run testdata/job.toml             # on the hosts of the job's hosts file
//	monarch local --hosts 2 -- bin/multihost  # two simulated hosts on this machine
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/monarch-go/monarch/actorrt"
)

// Trainer takes a step and tells where.
type Trainer struct{}

func (t *Trainer) Step(ctx *actorrt.Context) (string, error) {
	host, _ := os.Hostname()
	var env []string
	for _, k := range []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"} {
		env = append(env, k+"="+os.Getenv(k))
	}
	return fmt.Sprintf("Trainer %v taking a step on %s [%s]", ctx.MessageRank(), host, strings.Join(env, " ")), nil
}

func main() {
	if err := actorrt.Register[Trainer](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	actorrt.Main(func(ctx context.Context) error {
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		fmt.Printf("Host mesh extent: %v\n", hosts.Extent())
		trainerProcs, err := hosts.SpawnProcs(ctx, actorrt.JobProcs(actorrt.Dims{{"gpus", 4}}))
		if err != nil {
			return err
		}
		fmt.Printf("Process mesh extent: %v\n", trainerProcs.Extent())
		trainers, err := actorrt.Spawn[Trainer](ctx, trainerProcs, "trainer")
		if err != nil {
			return err
		}
		steps, err := actorrt.Method((*Trainer).Step).Call(trainers).Get(ctx)
		if err != nil {
			return err
		}
		for p, s := range steps.Items() {
			fmt.Printf("%v: %s\n", p, s)
		}
		return nil
	})
}
