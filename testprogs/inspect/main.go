// Command inspect is a job program for the tests of `monarch stacks`,
// `profile` and `exec`: on each of the job's hosts it starts INSPECT_GPUS
// procs (default 2), a mesh named workers, and on the client's host one
// command proc (sleepers) that runs sleep; then, as INSPECT_WORK says:
//
//   - block (the default): a mesh of Blocker actors (blockers) whose
//     actors block in stacksTestBlockHere until the job is stopped (and,
//     beside, in two concurrent calls of Wait, in stacksTestWaitHere); each
//     prints "blocking in stacksTestBlockHere pid=PID", and the program
//     READY once the calls are sent;
//   - burn: a mesh of Burner actors (burners); until the job is stopped
//     the client calls, one after another, Burn on burners rank 1 (an
//     ordinary endpoint burning 40 ms in profileTestBurnHere), Spin on
//     rank 0 (a concurrent one, 5 ms in profileTestSpinHere) and Kick on
//     rank 0 (whose ctx.Go function burns 5 ms in profileTestGoHere);
//     every other actor idles. It prints READY once the burners have
//     answered a first round.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/monarch-go/monarch/actorrt"
)

func main() {
	work := map[string]func(context.Context, *actorrt.ProcMesh) error{"block": block, "burn": burn}
	name := os.Getenv("INSPECT_WORK")
	if name == "" {
		name = "block"
	}
	do := work[name]
	if do == nil {
		fmt.Fprintf(os.Stderr, "INSPECT_WORK=%q: want block or burn\n", name)
		os.Exit(2)
	}
	gpus := 2
	if s := os.Getenv("INSPECT_GPUS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "INSPECT_GPUS=%q: want a count\n", s)
			os.Exit(2)
		}
		gpus = n
	}
	for _, err := range []error{actorrt.Register[Blocker](actorrt.Concurrent((*Blocker).Wait)), actorrt.Register[Burner](actorrt.Concurrent((*Burner).Spin))} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
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
		if _, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"n", 1}}, actorrt.WithName("sleepers"),
			actorrt.WithCommand("sleep", "600")); err != nil {
			return err
		}
		return do(ctx, procs)
	})
}
