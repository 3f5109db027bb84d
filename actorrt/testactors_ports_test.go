package actorrt_test

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/monarch-go/monarch/actorrt"
)

// Hop passes a port along: Forward hands it to the next mesh, Deliver
// sends on it.
type Hop struct{}

func (h *Hop) Forward(ctx *actorrt.Context, next *actorrt.ActorMesh[Hop], port actorrt.Port[string]) error {
	return actorrt.VoidMethod2((*Hop).Deliver).Broadcast(next, fmt.Sprintf("via %s", ctx.ActorInstance().ID()), port)
}

func (h *Hop) Deliver(ctx *actorrt.Context, msg string, port actorrt.Port[string]) error {
	return port.Send(msg + " to " + ctx.ActorInstance().ID())
}

// Open returns a port of a channel this actor opened (and never reads).
func (h *Hop) Open(ctx *actorrt.Context) (actorrt.Port[int], error) {
	port, _ := actorrt.OpenChannel[int](ctx)
	return port, nil
}

// Holder answers out of order: Hold keeps the port, Release answers every
// held port, last held first.
type Holder struct {
	held []held
}

type held struct {
	port actorrt.Port[int]
	n    int
}

func (h *Holder) Hold(ctx *actorrt.Context, port actorrt.Port[int], n int) error {
	h.held = append(h.held, held{port, n})
	return nil
}

func (h *Holder) Release(ctx *actorrt.Context) (int, error) {
	for i := len(h.held) - 1; i >= 0; i-- {
		if err := h.held[i].port.Send(h.held[i].n * 10); err != nil {
			return 0, err
		}
	}
	n := len(h.held)
	h.held = nil
	return n, nil
}

// Ignore takes a port and never answers on it.
func (h *Holder) Ignore(ctx *actorrt.Context, port actorrt.Port[int]) error { return nil }

// Refuse fails instead of answering.
func (h *Holder) Refuse(ctx *actorrt.Context, port actorrt.Port[int]) error {
	return fmt.Errorf("will not answer")
}

// Later answers from another goroutine, after returning.
func (h *Holder) Later(ctx *actorrt.Context, port actorrt.Port[string], s string) error {
	go port.Send("later: " + s)
	return nil
}

// Slow answers Wait at once, except the member at rank 0, which waits for
// its proc's gate to open.
type Slow struct{}

var slowGate = make(chan struct{})
var slowGateOnce sync.Once

func (s *Slow) Wait(ctx *actorrt.Context) (int, error) {
	r := ctx.ActorInstance().Rank().Rank()
	if r == 0 {
		select {
		case <-slowGate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return r, nil
}

func (s *Slow) OpenGate(ctx *actorrt.Context) error {
	slowGateOnce.Do(func() { close(slowGate) })
	return nil
}

// DataLoader and Trainer: the guide's references example.
type DataLoader struct{ i int }

func (d *DataLoader) Example(ctx *actorrt.Context) (string, error) {
	d.i++
	return fmt.Sprintf("loader%v#%d", ctx.ActorInstance().Rank(), d.i), nil
}

type Trainer struct {
	loader *actorrt.ActorMesh[DataLoader]
}

func (t *Trainer) Init(ctx *actorrt.Context, loaders *actorrt.ActorMesh[DataLoader]) error {
	t.loader = loaders.SliceAt(ctx.ActorInstance().Rank())
	return t.loader.Err()
}

func (t *Trainer) Step(ctx *actorrt.Context, input string) (string, error) {
	data, err := actorrt.Method((*DataLoader).Example).CallOne(t.loader).Get(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("trainer%v step with %s and %s", ctx.ActorInstance().Rank(), data, input), nil
}

// SpawnHere spawns a mesh from inside an actor, on procs it is given.
func (t *Trainer) SpawnHere(ctx *actorrt.Context, hosts *actorrt.HostMesh) (int, error) {
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"sub", 2}})
	if err != nil {
		return 0, err
	}
	defer procs.Stop(ctx)
	loaders, err := actorrt.Spawn[DataLoader](ctx, procs, "sub-loaders")
	if err != nil {
		return 0, err
	}
	v, err := actorrt.Method((*DataLoader).Example).Call(loaders).Get(ctx)
	return v.Len(), err
}

// Whoami reports what an actor knows of itself.
type Whoami struct{}

func (w *Whoami) Info(ctx *actorrt.Context) (string, error) {
	ai := ctx.ActorInstance()
	self, err := actorrt.MyMesh[Whoami](ctx)
	if err != nil {
		return "", err
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s|%v|%s|%v|%v|%v", ai.ID(), ai.Rank(), ai.MeshName(), ai.MeshExtent(), ai.Host() == host, self.Extent()), nil
}

var pidFn = actorrt.Remote("test_pid", func(ctx context.Context) (int, error) { return os.Getpid(), nil })

var addFn = actorrt.Remote1("test_add", func(ctx context.Context, n int) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("negative %d", n)
	}
	return n + 1, nil
})
