// Command controller shows a job-wide singleton: a controller that hands
// out the shards of a dataset to a mesh of trainers, made at first use by
// whichever trainer asks first (actorrt.GetOrSpawn), owned by the client,
// and found by name from anywhere in the job (actorrt.Lookup).
//
//	monarch local -- bin/controller -trainers 4 -shards 64
//
// Every trainer's Init asks for the controller at once; they all get the
// same one. Each trainer then takes shards from it until none are left,
// "trains" on each, and reports its loss. The client finds the controller
// by name and checks that every shard was trained on exactly once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/monarch-go/monarch/actorrt"
)

// Controller hands out shards, once each, and gathers the losses.
type Controller struct {
	shards int
	next   int
	losses map[int]float64 // by shard
	takers map[int]string  // by shard: the trainer that took it
}

func (c *Controller) Init(ctx *actorrt.Context, shards int) error {
	c.shards, c.losses, c.takers = shards, map[int]float64{}, map[int]string{}
	fmt.Printf("controller: made once, for %d shards\n", shards)
	return nil
}

// Take gives the next shard to trainer, or -1 when none are left.
func (c *Controller) Take(ctx *actorrt.Context, trainer string) (int, error) {
	if c.next == c.shards {
		return -1, nil
	}
	s := c.next
	c.next++
	c.takers[s] = trainer
	return s, nil
}

// Report records the loss of a shard.
func (c *Controller) Report(ctx *actorrt.Context, shard int, loss float64) error {
	if _, ok := c.takers[shard]; !ok {
		return fmt.Errorf("shard %d was never handed out", shard)
	}
	if _, dup := c.losses[shard]; dup {
		return fmt.Errorf("shard %d reported twice", shard)
	}
	c.losses[shard] = loss
	return nil
}

// Summary is what the controller saw.
type Summary struct {
	Reported int            `msgpack:"reported"`
	PerTaker map[string]int `msgpack:"per_taker"`
	MeanLoss float64        `msgpack:"mean_loss"`
}

func (c *Controller) Summary(ctx *actorrt.Context) (Summary, error) {
	s := Summary{Reported: len(c.losses), PerTaker: map[string]int{}}
	for shard, loss := range c.losses {
		s.PerTaker[c.takers[shard]]++
		s.MeanLoss += loss / float64(len(c.losses))
	}
	return s, nil
}

// Trainer trains on the shards the controller gives it.
type Trainer struct {
	ctl *actorrt.ActorMesh[Controller]
}

// Init gets the job's controller, made by whichever trainer asks first.
func (t *Trainer) Init(ctx *actorrt.Context, shards int) error {
	ctl, err := actorrt.Init1((*Controller).Init).GetOrSpawn(ctx, "controller", shards)
	t.ctl = ctl
	return err
}

// Train takes shards until none are left; it returns how many it took.
func (t *Trainer) Train(ctx *actorrt.Context) (int, error) {
	me := ctx.ActorInstance().ID()
	n := 0
	for {
		shard, err := take.CallOne(t.ctl, me).Get(ctx)
		if err != nil || shard < 0 {
			return n, err
		}
		loss := math.Exp(-float64(shard) / 16) // the "training"
		if _, err := report.CallOne(t.ctl, shard, loss).Get(ctx); err != nil {
			return n, err
		}
		n++
	}
}

var (
	take   = actorrt.Method1((*Controller).Take)
	report = actorrt.VoidMethod2((*Controller).Report)
)

func main() {
	trainers := flag.Int("trainers", 4, "trainer procs")
	shards := flag.Int("shards", 64, "shards of the dataset")
	flag.Parse()
	for _, err := range []error{actorrt.Register[Controller](), actorrt.Register[Trainer]()} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	actorrt.Main(func(ctx context.Context) error { return run(ctx, *trainers, *shards) })
}

func run(ctx context.Context, trainers, shards int) error {
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"trainers", trainers}})
	if err != nil {
		return err
	}
	// Every trainer's Init asks for the controller at the same time.
	ts, err := actorrt.Init1((*Trainer).Init).Spawn(ctx, procs, "trainers", shards)
	if err != nil {
		return err
	}
	took, err := actorrt.Method((*Trainer).Train).Call(ts).Get(ctx)
	if err != nil {
		return err
	}
	ctl, err := actorrt.Lookup[Controller](ctx, "controller")
	if err != nil {
		return err
	}
	sum, err := actorrt.Method((*Controller).Summary).CallOne(ctl).Get(ctx)
	if err != nil {
		return err
	}
	counts := took.Values()
	total := 0
	for _, n := range counts {
		total += n
	}
	fmt.Printf("trainers took %v shards (%d in all); the controller has %d reports from %d trainers, mean loss %.4f\n",
		counts, total, sum.Reported, len(sum.PerTaker), sum.MeanLoss)
	names := make([]string, 0, len(sum.PerTaker))
	for n := range sum.PerTaker {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Printf("  %s: %d shards\n", n, sum.PerTaker[n])
	}
	if total != shards || sum.Reported != shards {
		return &actorrt.ExitError{Code: 1, Err: errors.New("a shard was lost or trained on twice")}
	}
	return nil
}
