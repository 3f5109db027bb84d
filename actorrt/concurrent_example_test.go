package actorrt_test

import (
	"context"
	"strings"
	"sync"

	"github.com/monarch-go/monarch/actorrt"
)

// The concurrent endpoints sample of docs/guide.md, kept compiling.

type Generator struct {
	mu     sync.Mutex // Generate runs beside the other endpoints: share state under a lock
	policy []float32
	served int
}

// Generate is concurrent: up to 8 calls run at once in each generator.
func (g *Generator) Generate(ctx *actorrt.Context, prompt string) (string, error) {
	g.mu.Lock()
	policy := g.policy
	g.served++
	g.mu.Unlock()
	return sample(ctx, policy, prompt)
}

// Status is ordinary: one at a time, and it answers while Generate calls run.
func (g *Generator) Status(ctx *actorrt.Context) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.served, nil
}

// Reload returns at once; its goroutine loads the new policy. An error or
// panic there fails this actor, as an error nobody receives does.
func (g *Generator) Reload(ctx *actorrt.Context, path string) error {
	ctx.Go(func(ctx *actorrt.Context) error {
		policy, err := load(ctx, path)
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.policy = policy
		g.mu.Unlock()
		return nil
	})
	return nil
}

func sample(ctx context.Context, policy []float32, prompt string) (string, error) {
	return strings.ToUpper(prompt), ctx.Err()
}

func load(ctx context.Context, path string) ([]float32, error) { return []float32{1}, ctx.Err() }

func run(ctx context.Context) error { return nil }

// Example_concurrent registers an endpoint as concurrent, with a bound of
// 8 calls at once per actor (compiled, not run: it would serve as a proc).
func Example_concurrent() {
	actorrt.Register[Generator](actorrt.ConcurrentLimit((*Generator).Generate, 8))
	actorrt.Main(run)
}
