package collective_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
)

// Averager stands for a data-parallel trainer: each member computes
// gradients of its own, then all of them average them together.
type Averager struct{}

// Average all-reduces this member's gradients with the other members'
// along gpus, in place: every member ends with their mean. Each member of
// the group must make the same calls, in the same order.
func (a *Averager) Average(ctx *actorrt.Context, comm collective.Comm) ([]float64, error) {
	rank := float64(ctx.ActorInstance().Rank().Rank())
	grads := []float64{rank, 10 * rank} // this member's own
	err := collective.AllReduce(ctx, &comm, "gpus", grads, collective.Mean)
	return grads, err
}

var averageEp = actorrt.Method1((*Averager).Average)

// Every process of the test binary, procs included, registers the type.
func init() {
	if err := actorrt.Register[Averager](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// The client makes a communicator over a proc mesh and passes it to the
// actors there, which run the collective together; the data moves proc to
// proc, not through the client.
func Example() {
	ctx, cancel := context.WithTimeout(clientCtx, 30*time.Second)
	defer cancel()

	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer procs.Stop(ctx)
	comm, err := collective.New(ctx, procs)
	if err != nil {
		fmt.Println(err)
		return
	}
	averagers, err := actorrt.Spawn[Averager](ctx, procs, "example-averagers")
	if err != nil {
		fmt.Println(err)
		return
	}

	// Ranks 0 to 3 start with [r, 10r]: the mean is [1.5 15] everywhere.
	means, err := averageEp.Call(averagers, *comm).Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(means)
	// Output:
	// ValueMesh{gpus: 4}:
	//   {gpus: 0}: [1.5 15]
	//   {gpus: 1}: [1.5 15]
	//   {gpus: 2}: [1.5 15]
	//   {gpus: 3}: [1.5 15]
}
