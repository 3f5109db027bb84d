package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// InferenceEngine answers Infer out of order: the request's port goes to a
// worker goroutine, which answers later with the newest weights, even if
// UpdateWeights arrived after the request.
type InferenceEngine struct {
	q       chan actorrt.Port[string]
	weights atomic.Int64
}

func (e *InferenceEngine) Init(ctx *actorrt.Context) error {
	e.q = make(chan actorrt.Port[string], 64)
	go e.run(ctx)
	return nil
}

func (e *InferenceEngine) UpdateWeights(ctx *actorrt.Context, w int) error {
	e.weights.Store(int64(w))
	return nil
}

// Infer takes its reply port first: it is an explicit-response endpoint,
// and returns before the answer is sent.
func (e *InferenceEngine) Infer(ctx *actorrt.Context, port actorrt.Port[string]) error {
	e.q <- port
	return nil
}

func (e *InferenceEngine) run(ctx context.Context) {
	for {
		select {
		case port := <-e.q:
			time.Sleep(200 * time.Millisecond) // pretend to take time
			port.Send(fmt.Sprintf("inferred with: %d", e.weights.Load()))
		case <-ctx.Done():
			return
		}
	}
}

// outOfOrder: Responding Out of Order.
func outOfOrder(ctx context.Context, _ *actorrt.ProcMesh) error {
	heading("Responding out of order")
	engine, err := actorrt.Spawn[InferenceEngine](ctx, actorrt.ThisProc(ctx), "engine")
	if err != nil {
		return err
	}
	if err := actorrt.VoidMethod1((*InferenceEngine).UpdateWeights).Broadcast(engine, 0); err != nil {
		return err
	}
	first := actorrt.PortMethod((*InferenceEngine).Infer).CallOne(engine)
	second := actorrt.PortMethod((*InferenceEngine).Infer).CallOne(engine)
	if err := actorrt.VoidMethod1((*InferenceEngine).UpdateWeights).Broadcast(engine, 1); err != nil {
		return err
	}
	for _, f := range []*actorrt.Future[string]{first, second} {
		v, err := f.Get(ctx)
		if err != nil {
			return err
		}
		fmt.Println(v)
	}
	return nil
}
