// Command getting_started walks through the first sections of the getting
// started guide: defining an actor, spawning it, sending messages, meshes,
// broadcast, slicing, the actor context and message ordering.
//
//	go run ./examples/getting_started
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/monarch-go/monarch/actorrt"
)

// Counter is the guide's first actor.
type Counter struct{ value int }

func (c *Counter) Init(ctx *actorrt.Context, initial int) error { c.value = initial; return nil }
func (c *Counter) Increment(ctx *actorrt.Context) error         { c.value++; return nil }
func (c *Counter) GetValue(ctx *actorrt.Context) (int, error)   { return c.value, nil }

// Trainer reports where a message found it.
type Trainer struct{}

func (t *Trainer) Step(ctx *actorrt.Context) (string, error) {
	return fmt.Sprintf("Trainer %v taking a step.", ctx.MessageRank()), nil
}

// ContextAwareActor tells its own rank and the message's rank apart.
type ContextAwareActor struct{}

func (c *ContextAwareActor) GetContextInfo(ctx *actorrt.Context) (string, error) {
	return fmt.Sprintf("Actor rank: %v, message rank: %v", ctx.ActorInstance().Rank(), ctx.MessageRank()), nil
}

// Recorder keeps the order in which messages reached it.
type Recorder struct{ seen []int }

func (r *Recorder) Record(ctx *actorrt.Context, seq int) error {
	r.seen = append(r.seen, seq)
	return nil
}
func (r *Recorder) Seen(ctx *actorrt.Context) ([]int, error) { return r.seen, nil }

func main() {
	for _, err := range []error{
		actorrt.Register[Counter](),
		actorrt.Register[Trainer](),
		actorrt.Register[ContextAwareActor](),
		actorrt.Register[Recorder](),
	} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	actorrt.Main(run)
}

func run(ctx context.Context) error {
	fmt.Println("== Spawning an actor in the local process")
	counter, err := actorrt.Spawn[Counter](actorrt.ThisProc(), "counter", 0)
	if err != nil {
		return err
	}

	fmt.Println("== Sending a simple message")
	value, err := actorrt.CallOne(counter, (*Counter).GetValue).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("Counter value: %d\n", value)

	fmt.Println("== Multiple actors at once")
	procs, err := actorrt.ThisHost().SpawnProcs(actorrt.Dims{{"gpus", 8}})
	if err != nil {
		return err
	}
	counters, err := actorrt.Spawn[Counter](procs, "counters", 0)
	if err != nil {
		return err
	}
	fmt.Printf("Process mesh extent: %v\n", procs.Extent())

	fmt.Println("== Broadcasting messages")
	if err := actorrt.BroadcastVoid(counters, (*Counter).Increment); err != nil {
		return err
	}

	fmt.Println("== Slicing meshes")
	if err := actorrt.BroadcastVoid(counters.Slice("gpus", 0, 4), (*Counter).Increment); err != nil {
		return err
	}
	values, err := actorrt.Call(counters, (*Counter).GetValue).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(values)

	fmt.Println("== Trainers")
	trainerProcs, err := actorrt.ThisHost().SpawnProcs(actorrt.Dims{{"gpus", 4}})
	if err != nil {
		return err
	}
	fmt.Printf("Process mesh extent: %v\n", trainerProcs.Extent())
	trainers, err := actorrt.Spawn[Trainer](trainerProcs, "trainer")
	if err != nil {
		return err
	}
	steps, err := actorrt.Call(trainers, (*Trainer).Step).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(steps)

	fmt.Println("== Actor context")
	c, err := actorrt.Spawn[ContextAwareActor](trainerProcs, "context_actor")
	if err != nil {
		return err
	}
	infos, err := actorrt.Call(c.Slice("gpus", 2, 4), (*ContextAwareActor).GetContextInfo).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(infos)

	fmt.Println("== Message ordering")
	recorders, err := actorrt.Spawn[Recorder](trainerProcs, "recorders")
	if err != nil {
		return err
	}
	for seq := 0; seq < 100; seq++ {
		target := recorders
		if seq%3 == 0 {
			target = recorders.Slice("gpus", 1, 3)
		}
		if err := actorrt.BroadcastVoid1(target, (*Recorder).Record, seq); err != nil {
			return err
		}
	}
	seen, err := actorrt.Call(recorders, (*Recorder).Seen).Get(ctx)
	if err != nil {
		return err
	}
	for p, s := range seen.Items() {
		fmt.Printf("recorder %v got %d messages, in order: %v\n", p, len(s), increasing(s))
	}
	return nil
}

func increasing(s []int) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}
