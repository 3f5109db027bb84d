// Command race is a job program for the tests of a hub of several NATS
// servers ([bus] hubs): round after round it spawns procs on host 0 and
// Counters on them, and at once has an actor on host 1 (which the client
// tells, so that the news goes round by another server of the hub than
// the one the procs' subscriptions went through first) broadcast to them
// and read them. Every count must be right; a message that came before
// its subscription was known everywhere would be lost. It prints
// "RACE OK <rounds>".
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Counter counts increments.
type Counter struct{ n int }

func (c *Counter) Inc(ctx *actorrt.Context) error        { c.n++; return nil }
func (c *Counter) Get(ctx *actorrt.Context) (int, error) { return c.n, nil }

// Teller hits the counters it is told of.
type Teller struct{}

// Hit broadcasts three increments to counters, then reads them: each
// must have counted three. It returns how many it checked.
func (t *Teller) Hit(ctx *actorrt.Context, counters *actorrt.ActorMesh[Counter]) (int, error) {
	for range 3 {
		if err := actorrt.VoidMethod((*Counter).Inc).Broadcast(counters); err != nil {
			return 0, err
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	values, err := actorrt.Method((*Counter).Get).Call(counters).Get(callCtx)
	if err != nil {
		return 0, err
	}
	for p, v := range values.Items() {
		if v != 3 {
			return 0, fmt.Errorf("counter %v counted %d of 3", p, v)
		}
	}
	return len(values.Values()), nil
}

func main() {
	for _, err := range []error{actorrt.Register[Counter](), actorrt.Register[Teller]()} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	rounds := 20
	if len(os.Args) > 1 {
		rounds, _ = strconv.Atoi(os.Args[1])
	}
	actorrt.Main(func(ctx context.Context) error {
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		tellerProcs, err := hosts.Slice("hosts", 1, 2).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
		if err != nil {
			return err
		}
		teller, err := actorrt.Spawn[Teller](ctx, tellerProcs, "teller")
		if err != nil {
			return err
		}
		target := hosts.Slice("hosts", 0, 1)
		for r := 0; r < rounds; r++ {
			procs, err := target.SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
			if err != nil {
				return err
			}
			counters, err := actorrt.Spawn[Counter](ctx, procs, fmt.Sprint("counters", r))
			if err != nil {
				return err
			}
			n, err := actorrt.Method1((*Teller).Hit).CallOne(teller, counters).Get(ctx)
			if err != nil {
				return fmt.Errorf("round %d: %w", r, err)
			}
			if n != 2 {
				return fmt.Errorf("round %d: %d counters checked, want 2", r, n)
			}
			if err := procs.Stop(ctx); err != nil {
				return err
			}
		}
		fmt.Println("RACE OK", rounds)
		return nil
	})
}
