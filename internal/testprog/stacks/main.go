// Command stacks is a job program for `monarch stacks` tests: on each of
// the job's hosts it starts STACKS_GPUS procs (default 2), a mesh named
// workers, whose actors block in stacksTestBlockHere until the job is
// stopped, and one command proc (sleepers) that runs sleep. Each blocked
// actor prints "blocking in stacksTestBlockHere pid=PID"; the program
// prints READY once the calls are sent.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/monarch-go/monarch/actorrt"
)

// Blocker blocks in a function with a name no other stack has.
type Blocker struct{}

// Block blocks until the actor stops (its context ends).
func (b *Blocker) Block(ctx *actorrt.Context) error {
	fmt.Printf("blocking in stacksTestBlockHere pid=%d\n", os.Getpid())
	stacksTestBlockHere(ctx)
	return nil
}

//go:noinline
func stacksTestBlockHere(ctx context.Context) {
	<-ctx.Done()
}

func main() {
	if err := actorrt.Register[Blocker](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gpus := 2
	if s := os.Getenv("STACKS_GPUS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "STACKS_GPUS=%q: want a count\n", s)
			os.Exit(2)
		}
		gpus = n
	}
	actorrt.Main(func(ctx context.Context) error {
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", gpus}}, actorrt.WithName("workers"))
		if err != nil {
			return err
		}
		if _, err := actorrt.ThisHost().SpawnProcs(ctx, actorrt.Dims{{"n", 1}}, actorrt.WithName("sleepers"),
			actorrt.WithCommand("sleep", "600")); err != nil {
			return err
		}
		b, err := actorrt.Spawn[Blocker](ctx, procs, "blockers")
		if err != nil {
			return err
		}
		if err := actorrt.VoidMethod((*Blocker).Block).Broadcast(b); err != nil {
			return err
		}
		fmt.Println("READY")
		<-ctx.Done()
		return nil
	})
}
