// Command ddp is data-parallel training: a logistic regression on a
// synthetic dataset, its rows split over 4 procs. Every step each proc
// computes the gradient of its shard's loss with gorgonia, the procs
// all-reduce the gradients among themselves (package collective, proc to
// proc, not through the client) and each updates its copy of the
// parameters. The same training then runs in this process alone, with the
// same seed: the two losses must agree.
//
//	monarch local -- bin/ddp            # or bin/ddp, with a bus of its own
//	monarch local -- bin/ddp -steps 200 -procs 2
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
)

// Trainer holds one shard of the data and a copy of the parameters.
type Trainer struct {
	m     *model
	share float64 // its rows' share of all rows: its gradient's weight
	w     []float64
	b     float64
	comm  *collective.Comm
}

// Setup is what each trainer starts from.
type Setup struct {
	Comm  collective.Comm `msgpack:"comm"`
	Seed  uint64          `msgpack:"seed"`
	Procs int             `msgpack:"procs"`
	LR    float64         `msgpack:"lr"`
}

// Init takes its shard: rows rank, rank+procs, ... of the dataset.
func (t *Trainer) Init(ctx *actorrt.Context, s Setup) error {
	x, y := dataset(s.Seed)
	r := ctx.ActorInstance().Rank().Rank()
	var sx [][]float64
	var sy []float64
	for i := r; i < len(x); i += s.Procs {
		sx, sy = append(sx, x[i]), append(sy, y[i])
	}
	m, err := newModel(sx, sy)
	if err != nil {
		return err
	}
	t.m, t.share, t.w, t.comm = m, float64(len(sx))/float64(len(x)), make([]float64, features), &s.Comm
	return nil
}

// Step computes the local gradient, all-reduces it with the other
// trainers, takes the step and returns the loss over all the data.
func (t *Trainer) Step(ctx *actorrt.Context, lr float64) (float64, error) {
	loss, grad, err := t.m.eval(t.w, t.b)
	if err != nil {
		return 0, err
	}
	// The mean over all rows is the shares' weighted sum of the shards'
	// means: the loss rides along with the gradient.
	buf := append(grad, loss)
	for i := range buf {
		buf[i] *= t.share
	}
	if err := collective.AllReduce(ctx, t.comm, "procs", buf, collective.Sum); err != nil {
		return 0, err
	}
	sgd(t.w, &t.b, buf[:features+1], lr)
	return buf[features+1], nil
}

func main() {
	steps := flag.Int("steps", 100, "training steps")
	procs := flag.Int("procs", 4, "procs to train on")
	lr := flag.Float64("lr", 0.5, "learning rate")
	seed := flag.Uint64("seed", 7, "the dataset's seed")
	flag.Parse()
	if err := actorrt.Register[Trainer](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	actorrt.Main(func(ctx context.Context) error { return run(ctx, *steps, *procs, *lr, *seed) })
}

func run(ctx context.Context, steps, nprocs int, lr float64, seed uint64) error {
	procs, err := actorrt.ThisHost().SpawnProcs(ctx, actorrt.Dims{{"procs", nprocs}})
	if err != nil {
		return err
	}
	comm, err := collective.New(ctx, procs)
	if err != nil {
		return err
	}
	trainers, err := actorrt.Spawn[Trainer](ctx, procs, "trainers", Setup{Comm: *comm, Seed: seed, Procs: nprocs, LR: lr})
	if err != nil {
		return err
	}
	step := actorrt.Method1((*Trainer).Step)
	var ddp float64
	t0 := time.Now()
	for s := 1; s <= steps; s++ {
		losses, err := step.Call(trainers, lr).Get(ctx)
		if err != nil {
			return err
		}
		ddp = losses.Values()[0]
		for _, l := range losses.Values() {
			if l != ddp {
				return fmt.Errorf("step %d: the trainers disagree on the loss: %v", s, losses.Values())
			}
		}
		if s == 1 || s%20 == 0 {
			fmt.Printf("step %d loss %.10f\n", s, ddp)
		}
	}
	perDDP := time.Since(t0) / time.Duration(steps)

	// The same training in this process alone.
	x, y := dataset(seed)
	m, err := newModel(x, y)
	if err != nil {
		return err
	}
	w, b := make([]float64, features), 0.0
	var single float64
	t0 = time.Now()
	for range steps {
		loss, grad, err := m.eval(w, b)
		if err != nil {
			return err
		}
		single = loss
		sgd(w, &b, grad, lr)
	}
	perSingle := time.Since(t0) / time.Duration(steps)
	// The loss a step returns is the loss before that step's update.
	diff := math.Abs(ddp - single)
	fmt.Printf("after %d steps on %d procs: loss %.10f; in one process: %.10f; difference %.2g\n", steps, nprocs, ddp, single, diff)
	fmt.Printf("a step: %v on %d procs, %v in one process\n", perDDP.Round(time.Microsecond), nprocs, perSingle.Round(time.Microsecond))
	if diff > 1e-6 {
		return &actorrt.ExitError{Code: 1, Err: fmt.Errorf("the data-parallel loss differs from the single-process loss by %g", diff)}
	}
	return nil
}
