// Command multihost is the guide's "Multiple Hosts" section: the job's
// hosts come from its config (actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")),
// trainers run on every host, and each reports where it runs and the
// torchrun variables it was given. Each trainer also writes a line on its
// proc's stdout, which the job streams to the client's (the guide's
// "Logging").
//
// With -hold D the program keeps its trainers for D after their step, or
// until the job is stopped (monarch stop, Ctrl-C), to look at a live job
// with monarch status, top, logs, exec or its dashboard.
//
//	monarch run testdata/job.toml                               # on the hosts of the job's hosts file
//	monarch local --hosts 2 -- bin/multihost                    # two simulated hosts on this machine
//	monarch local --hosts 2 -- bin/multihost -gpus 2 -hold 10m  # and keep them
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Trainer takes a step and tells where.
type Trainer struct{}

func (t *Trainer) Step(ctx *actorrt.Context) (string, error) {
	host, _ := os.Hostname()
	fmt.Printf("stepping on %s\n", host) // a line of this proc's log
	var env []string
	for _, k := range []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"} {
		env = append(env, k+"="+os.Getenv(k))
	}
	return fmt.Sprintf("Trainer %v taking a step on %s (pid %d) [%s]", ctx.MessageRank(), host, os.Getpid(), strings.Join(env, " ")), nil
}

func main() {
	gpus := flag.Int("gpus", 4, "procs per host, unless the job file's [procs] says")
	hold := flag.Duration("hold", 0, "keep the trainers this long after their step, or until the job is stopped")
	flag.Parse()
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
		trainerProcs, err := hosts.SpawnProcs(ctx, actorrt.JobProcs(ctx, actorrt.Dims{{"gpus", *gpus}}))
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
		if *hold > 0 {
			fmt.Printf("holding the trainers for %v or until the job is stopped\n", *hold)
			select {
			case <-ctx.Done():
			case <-time.After(*hold):
			}
		}
		return nil
	})
}
