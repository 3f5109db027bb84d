package main

// INSPECT_WORK=burn: three endpoints burn CPU.

import (
	"context"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Burner burns CPU in functions with names no other stack has.
type Burner struct{}

// Burn burns ms milliseconds of CPU.
func (b *Burner) Burn(ctx *actorrt.Context, ms int) error {
	profileTestBurnHere(time.Duration(ms) * time.Millisecond)
	return nil
}

// Spin (concurrent) burns ms milliseconds of CPU.
func (b *Burner) Spin(ctx *actorrt.Context, ms int) error {
	profileTestSpinHere(time.Duration(ms) * time.Millisecond)
	return nil
}

// Kick starts a ctx.Go function that burns ms milliseconds of CPU.
func (b *Burner) Kick(ctx *actorrt.Context, ms int) error {
	ctx.Go(func(*actorrt.Context) error {
		profileTestGoHere(time.Duration(ms) * time.Millisecond)
		return nil
	})
	return nil
}

// Each burner keeps its result in a var of its own (they may run at once).
var sinkBurn, sinkSpin, sinkGo uint64

// The three burners loop in their own bodies (no helper, which pprof
// would show on top instead).

//go:noinline
func profileTestBurnHere(d time.Duration) {
	x := sinkBurn
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 100000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sinkBurn = x
}

//go:noinline
func profileTestSpinHere(d time.Duration) {
	x := sinkSpin
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 100000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sinkSpin = x
}

//go:noinline
func profileTestGoHere(d time.Duration) {
	x := sinkGo
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 100000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sinkGo = x
}

// burn calls, one after another until the job is stopped, Burn on
// burners rank 1, Spin on rank 0 and Kick on rank 0; it prints READY after
// the first round.
func burn(ctx context.Context, procs *actorrt.ProcMesh) error {
	burnM := actorrt.VoidMethod1((*Burner).Burn)
	spinM := actorrt.VoidMethod1((*Burner).Spin)
	kickM := actorrt.VoidMethod1((*Burner).Kick)
	b, err := actorrt.Spawn[Burner](ctx, procs, "burners")
	if err != nil {
		return err
	}
	first := b.At("hosts", 0)
	r0, r1 := first.At("gpus", 0), first.At("gpus", 1)
	for i := 0; ctx.Err() == nil; i++ {
		if _, err := burnM.CallOne(r1, 40).Get(ctx); err != nil {
			return ignoreEnd(ctx, err)
		}
		if _, err := spinM.CallOne(r0, 5).Get(ctx); err != nil {
			return ignoreEnd(ctx, err)
		}
		if _, err := kickM.CallOne(r0, 5).Get(ctx); err != nil {
			return ignoreEnd(ctx, err)
		}
		if i == 0 {
			fmt.Println("READY")
		}
	}
	return nil
}

// ignoreEnd is err, unless the job is ending.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
