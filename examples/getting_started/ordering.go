package main

import (
	"context"
	"fmt"

	"github.com/monarch-go/monarch/actorrt"
)

// Recorder keeps the order in which messages reached it.
type Recorder struct{ seen []int }

func (r *Recorder) Record(ctx *actorrt.Context, seq int) error {
	r.seen = append(r.seen, seq)
	return nil
}

func (r *Recorder) Seen(ctx *actorrt.Context) ([]int, error) { return r.seen, nil }

// ordering: Message Ordering. Sends to the whole mesh and to a slice mix;
// every recorder sees its messages in send order.
func ordering(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("Message ordering")
	recorders, err := actorrt.Spawn[Recorder](ctx, trainerProcs, "recorders")
	if err != nil {
		return err
	}
	for seq := 0; seq < 100; seq++ {
		target := recorders
		if seq%3 == 0 {
			target = recorders.Slice("gpus", 1, 3)
		}
		if err := actorrt.VoidMethod1((*Recorder).Record).Broadcast(target, seq); err != nil {
			return err
		}
	}
	seen, err := actorrt.Method((*Recorder).Seen).Call(recorders).Get(ctx)
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
