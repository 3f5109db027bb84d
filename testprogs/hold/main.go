// Command hold is a job program for launcher tests: it starts procs on the
// job's hosts, reports them, and holds them until it is stopped (or a
// failure nobody handles ends it, through the default fault hook). With
// HOLD_IGNORE_STOP=1 it ignores a stop request (its context's end).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Holder reports its proc.
type Holder struct{}

func (h *Holder) Where(ctx *actorrt.Context) (string, error) {
	host, _ := os.Hostname()
	fmt.Printf("holding on %s\n", host) // a line for the job's log
	return fmt.Sprintf("%s/%d", host, os.Getpid()), nil
}

func main() {
	if err := actorrt.Register[Holder](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	actorrt.Main(func(ctx context.Context) error {
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		procs, err := hosts.SpawnProcs(ctx, actorrt.JobProcs(actorrt.Dims{{"gpus", 2}}))
		if err != nil {
			return err
		}
		h, err := actorrt.Spawn[Holder](ctx, procs, "holders")
		if err != nil {
			return err
		}
		where, err := actorrt.Method((*Holder).Where).Call(h).Get(ctx)
		if err != nil {
			return err
		}
		for _, w := range where.Values() {
			fmt.Println("PROC", w)
		}
		fmt.Println("READY")
		done := ctx.Done()
		if os.Getenv("HOLD_IGNORE_STOP") == "1" {
			done = nil // a program that does not return when asked to stop
		}
		select {
		case <-done:
		case <-time.After(10 * time.Minute):
		}
		return nil
	})
}
