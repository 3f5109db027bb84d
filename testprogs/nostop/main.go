// Command nostop is a job program for the launcher's stop grace test: it
// starts the job's procs, prints READY and does not return when the job
// is asked to stop (it ignores its context), for at most ten minutes.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

func main() {
	actorrt.Main(func(ctx context.Context) error {
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		if _, err := hosts.SpawnProcs(ctx, actorrt.JobProcs(ctx, actorrt.Dims{{"procs", 1}})); err != nil {
			return err
		}
		fmt.Println("READY")
		time.Sleep(10 * time.Minute)
		return nil
	})
}
