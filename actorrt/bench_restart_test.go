package actorrt_test

import (
	"context"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// BenchmarkRestartAfterPanic: a member of a mesh with a restart policy
// (no backoff) panics with nobody to receive it; the time until its new
// instance answers a call (sent right after the panic, held for it or
// retried if it was in the failed one's mailbox), beside what the owner
// did before restarts in place: a fresh 1-proc mesh and its actor,
// spawned until it answers. Medians in ms.
func BenchmarkRestartAfterPanic(b *testing.B) {
	ctx := context.Background()
	procs, err := actorrt.ThisHost().SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { procs.Stop(ctx) })
	policy := actorrt.RestartPolicy{MaxRestarts: 1 << 20, Window: time.Second}
	m, err := actorrt.SpawnWith[Phoenix](ctx, procs, "bench-restart", actorrt.SpawnOptions{Restart: &policy}, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	ours := func() float64 {
		old, err := phoenixNonce.CallOne(m).Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := actorrt.VoidMethod((*Phoenix).Panic).Broadcast(m); err != nil {
			b.Fatal(err)
		}
		for deadline := t0.Add(30 * time.Second); ; {
			n, err := phoenixNonce.CallOne(m).Get(ctx)
			if err == nil && n != old {
				return float64(time.Since(t0).Microseconds()) / 1e3
			}
			if time.Now().After(deadline) {
				b.Fatalf("no new instance within 30s: %v", err)
			}
		}
	}
	floor := func() float64 {
		t0 := time.Now()
		p, err := actorrt.ThisHost().SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
		if err != nil {
			b.Fatal(err)
		}
		fresh, err := actorrt.Spawn[Phoenix](ctx, p, "bench-fresh", dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := phoenixNonce.CallOne(fresh).Get(ctx); err != nil {
			b.Fatal(err)
		}
		took := float64(time.Since(t0).Microseconds()) / 1e3
		if err := p.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		return took
	}
	o, f := alternate(b, 15, ours, floor)
	report(b, "restart-after-panic-ms", o, f, "ms", "<=", 0.1)
}
