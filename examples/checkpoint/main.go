// Command checkpoint is a training-like loop that survives the end of its
// job: it checkpoints to a file when the job is about to end (a
// time-limit warning, a stop, a preemption: actorrt.Preempted) and
// resumes from that file when it runs again (a requeued Slurm job counts
// its restarts in actorrt.RestartCount).
//
//	monarch local --hosts 2 -- bin/checkpoint -steps 500        # Ctrl-\ aside, try: monarch stop JOB
//	monarch run job.toml --detach                               # on Slurm, [slurm] requeue = true
//
// Each step every trainer (one per proc) moves its weight toward the
// target and returns it; the client keeps the mean, which is the whole
// state a checkpoint holds. Each start appends a line to the file
// <checkpoint>.starts: what tests and users count.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Trainer holds one shard's weight.
type Trainer struct {
	weight float64
	heard  string // the last notice this trainer heard, if any
	notes  <-chan actorrt.PreemptNotice
}

func (t *Trainer) Init(ctx *actorrt.Context) error {
	// Every actor can hear that the job is ending, as the client does:
	// Init's ctx lasts as long as the actor.
	t.notes = actorrt.Preempted(ctx)
	return nil
}

// Load sets the weight from a checkpoint.
func (t *Trainer) Load(ctx *actorrt.Context, w float64) error { t.weight = w; return nil }

// Step moves the weight a tenth of the way to target and returns it.
func (t *Trainer) Step(ctx *actorrt.Context, target float64, work time.Duration) (float64, error) {
	time.Sleep(work) // the "compute"
	t.weight += (target - t.weight) / 10
	return t.weight, nil
}

// Heard returns the last notice this trainer heard, "" if none.
func (t *Trainer) Heard(ctx *actorrt.Context) (string, error) {
	for {
		select {
		case n := <-t.notes:
			t.heard = n.Reason
		default:
			return t.heard, nil
		}
	}
}

// state is what a checkpoint holds.
type state struct {
	Step   int     `json:"step"`
	Weight float64 `json:"weight"`
}

func main() {
	steps := flag.Int("steps", 200, "steps to train")
	work := flag.Duration("work", 20*time.Millisecond, "time a step takes")
	path := flag.String("checkpoint", "checkpoint.json", "the checkpoint file")
	flag.Parse()
	if err := actorrt.Register[Trainer](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	actorrt.Main(func(ctx context.Context) error { return train(ctx, *steps, *work, *path) })
}

func train(ctx context.Context, steps int, work time.Duration, path string) error {
	notes := actorrt.Preempted(ctx)
	restart := actorrt.RestartCount()
	if err := appendLine(path+".starts", fmt.Sprintf("start %d", restart)); err != nil {
		return err
	}
	st, err := load(path)
	if err != nil {
		return err
	}
	if st.Step > 0 {
		fmt.Printf("resuming from step %d (weight %.4f, restart %d)\n", st.Step, st.Weight, restart)
	}
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if errors.Is(err, actorrt.ErrNoHostsConfig) {
		hosts, err = actorrt.ThisHost(ctx), nil
	}
	if err != nil {
		return err
	}
	procs, err := hosts.SpawnProcs(ctx, actorrt.JobProcs(ctx, actorrt.Dims{{"gpus", 2}}))
	if err != nil {
		return err
	}
	trainers, err := actorrt.Spawn[Trainer](ctx, procs, "trainer")
	if err != nil {
		return err
	}
	if _, err := actorrt.VoidMethod1((*Trainer).Load).Call(trainers, st.Weight).Get(ctx); err != nil {
		return err
	}
	step := actorrt.Method2((*Trainer).Step)
	for st.Step < steps {
		select {
		case n := <-notes:
			return checkpointed(ctx, path, st, n.Reason, trainers)
		case <-ctx.Done():
			return checkpointed(ctx, path, st, context.Cause(ctx).Error(), trainers)
		default:
		}
		ws, err := step.Call(trainers, 1.0, work).Get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return checkpointed(ctx, path, st, context.Cause(ctx).Error(), trainers)
			}
			return err
		}
		sum := 0.0
		for _, w := range ws.Values() {
			sum += w
		}
		st = state{Step: st.Step + 1, Weight: sum / float64(ws.Len())}
		if st.Step%50 == 0 {
			fmt.Printf("step %d weight %.4f\n", st.Step, st.Weight)
		}
	}
	fmt.Printf("trained %d steps: weight %.4f (loss %.2g)\n", st.Step, st.Weight, math.Abs(1-st.Weight))
	return os.Remove(path) // done: the next run starts afresh
}

// checkpointed saves st, says why and which trainers heard the notice too.
func checkpointed(ctx context.Context, path string, st state, why string, trainers *actorrt.ActorMesh[Trainer]) error {
	if err := save(path, st); err != nil {
		return err
	}
	fmt.Printf("checkpointed at step %d: %s\n", st.Step, why)
	// The trainers heard it from the client; ask them (briefly: the job
	// is going).
	askCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	heard, err := actorrt.Method((*Trainer).Heard).Call(trainers).Get(askCtx)
	if err == nil {
		for p, h := range heard.Items() {
			fmt.Printf("trainer %v heard: %s\n", p, h)
		}
	}
	return nil
}

func load(path string) (state, error) {
	var st state
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return st, nil
}

// save writes the checkpoint whole or not at all: a temporary file,
// renamed.
func save(path string, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
