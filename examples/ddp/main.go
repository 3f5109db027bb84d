// Command ddp is data-parallel training on dtensor: a 2-layer perceptron
// on a synthetic dataset whose rows the client scatters over 4 procs.
// Every step each proc computes its rows' loss and, by gorgonia, its
// gradients; the procs average the gradients among themselves (Reduce,
// as collectives, proc to proc), and Adam updates every proc's copy of
// the parameters there: the parameters never come to the client, only
// the loss does. The same training runs in this process alone too, on
// all the rows, with the same start, in turns of 20 steps with the
// procs' (both timed on a machine as busy): the two losses must agree.
//
//	monarch local -- bin/ddp            # or bin/ddp, with a bus of its own
//	monarch local -- bin/ddp -steps 200 -procs 2
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/dtensor"
)

func main() {
	steps := flag.Int("steps", 100, "training steps")
	procs := flag.Int("procs", 4, "procs to train on (they must divide the 512 rows)")
	lr := flag.Float64("lr", 0.01, "Adam's learning rate")
	seed := flag.Uint64("seed", 7, "the dataset's and the parameters' seed")
	flag.Parse()
	actorrt.Main(func(ctx context.Context) error { return run(ctx, *steps, *procs, *lr, *seed) })
}

// trainer is the model on a mesh: the rows scattered, the parameters
// replicated, Adam over them.
type trainer struct {
	x, y   *dtensor.Tensor
	params []*dtensor.Tensor // W1, b1, W2, b2
	opt    *dtensor.Optimizer
	first  actorrt.Point // where the loss is fetched from
}

// newTrainer sends the data and the starting parameters to the procs.
func newTrainer(m *dtensor.Mesh, x, y []float64, start [][]float64, lr float64) (*trainer, error) {
	var s dtensor.Step
	t := &trainer{
		x:     s.Scatter(m, "procs", x, rows, features), // each proc its rows
		y:     s.Scatter(m, "procs", y, rows, 1),
		first: m.Extent().Points()[0],
	}
	for i, p := range start {
		t.params = append(t.params, s.FromSlice(m, p, shapes[i]...)) // the same on every proc
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	var err error
	t.opt, err = dtensor.NewOptimizer(dtensor.DefaultAdam(lr), t.params...)
	return t, err
}

// step records one training step and sends for its loss, the mean over
// all rows before the update, without waiting for it: the caller records
// the next step meanwhile, and the procs, running the steps in order,
// need not wait for it.
func (t *trainer) step(ctx context.Context) (*dtensor.ShardFuture, error) {
	var s dtensor.Step
	w1, b1, w2, b2 := t.params[0], t.params[1], t.params[2], t.params[3]
	h := s.Relu(s.Add(s.MatMul(t.x, w1), b1)) // b1 (hidden) broadcasts over the rows
	z := s.Add(s.MatMul(h, w2), b2)
	loss := s.Mean(s.Sub(s.Softplus(z), s.Mul(t.y, z)), 0) // this proc's rows' mean
	grads := s.Grad(ctx, loss, t.params...)
	// Equal shares of rows: the mean of the procs' means is the mean over
	// all rows, and the mean of their gradients its gradient. The
	// gradients and the loss are averaged together, in one collective.
	avg := s.ReduceAll(ctx, append(grads, loss), dtensor.Mean) // one per tensor, even once the step has failed
	s.Update(t.opt, avg[:len(grads)])
	l := s.FetchLater(avg[len(grads)], t.first)
	s.DropAllBut(append([]*dtensor.Tensor{t.x, t.y}, t.params...)...) // after the fetch, on the procs
	return l, s.Err()
}

// round is how many steps each training takes in turn: the two are timed
// in alternating rounds, so that a machine busy with other work slows
// both alike.
const round = 20

func run(ctx context.Context, steps, nprocs int, lr float64, seed uint64) error {
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"procs", nprocs}})
	if err != nil {
		return err
	}
	x, y := dataset(seed)
	start := initial(seed)
	tr, err := newTrainer(dtensor.Activate(procs), x, y, start, lr)
	if err != nil {
		return err
	}
	// The same training in this process alone, on all the rows.
	m, err := newModel(x, y)
	if err != nil {
		return err
	}
	opt := newAdam(lr)
	var ddp, single float64
	var inDDP, inSingle time.Duration
	for done := 0; done < steps; done += round {
		n := min(round, steps-done)
		t0 := time.Now()
		if ddp, err = tr.steps(ctx, done, n); err != nil {
			return err
		}
		inDDP += time.Since(t0)
		t0 = time.Now()
		for range n {
			loss, grads, err := m.eval(start)
			if err != nil {
				return err
			}
			single = loss
			opt.step(start, grads)
		}
		inSingle += time.Since(t0)
	}
	perDDP, perSingle := inDDP/time.Duration(steps), inSingle/time.Duration(steps)
	// The loss a step returns is the loss before that step's update.
	diff := math.Abs(ddp - single)
	fmt.Printf("after %d steps on %d procs: loss %.10f; in one process: %.10f; difference %.2g\n", steps, nprocs, ddp, single, diff)
	fmt.Printf("a step: %v on %d procs, %v in one process\n", perDDP.Round(time.Microsecond), nprocs, perSingle.Round(time.Microsecond))
	if diff > 1e-6 {
		return &actorrt.ExitError{Code: 1, Err: fmt.Errorf("the data-parallel loss differs from the single-process loss by %g", diff)}
	}
	return nil
}

// steps runs steps done+1 to done+n on the procs and returns the last
// one's loss. Each step's loss is waited for once the next step is sent,
// so that the procs, running the steps in order, need not wait for the
// client.
func (t *trainer) steps(ctx context.Context, done, n int) (float64, error) {
	var last *dtensor.ShardFuture
	var loss float64
	for s := done + 1; s <= done+n+1; s++ {
		var next *dtensor.ShardFuture
		if s <= done+n {
			var err error
			if next, err = t.step(ctx); err != nil {
				return 0, fmt.Errorf("step %d: %w", s, err)
			}
		}
		if last != nil {
			l, err := last.Get(ctx)
			if err != nil {
				return 0, fmt.Errorf("step %d: %w", s-1, err)
			}
			loss = l.Float64s()[0]
			if s-1 == 1 || (s-1)%20 == 0 {
				fmt.Printf("step %d loss %.10f\n", s-1, loss)
			}
		}
		last = next
	}
	return loss, nil
}
