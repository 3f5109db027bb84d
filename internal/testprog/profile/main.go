// Command profile is a job program for `monarch profile` tests: on each
// of the job's hosts it starts PROFILE_GPUS procs (default 2), a mesh named
// workers, with a mesh of Burner actors (burners) on them, and one command
// proc (sleepers) that runs sleep. Until the job is stopped the client
// calls, one after another, Burn on burners rank 1 (an ordinary endpoint
// burning 40 ms in profileTestBurnHere), Spin on rank 0 (a concurrent one,
// 5 ms in profileTestSpinHere) and Kick on rank 0 (whose ctx.Go function
// burns 5 ms in profileTestGoHere); every other actor idles. It prints
// READY once the burners have answered a first round.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
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

func main() {
	if err := actorrt.Register[Burner](actorrt.Concurrent((*Burner).Spin)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gpus := 2
	if s := os.Getenv("PROFILE_GPUS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "PROFILE_GPUS=%q: want a count\n", s)
			os.Exit(2)
		}
		gpus = n
	}
	burn := actorrt.VoidMethod1((*Burner).Burn)
	spin := actorrt.VoidMethod1((*Burner).Spin)
	kick := actorrt.VoidMethod1((*Burner).Kick)
	actorrt.Main(func(ctx context.Context) error {
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", gpus}}, actorrt.WithName("workers"))
		if err != nil {
			return err
		}
		if _, err := actorrt.ThisHost().SpawnProcs(ctx, actorrt.Dims{{"n", 1}}, actorrt.WithName("sleepers"),
			actorrt.WithCommand("sleep", "600")); err != nil {
			return err
		}
		b, err := actorrt.Spawn[Burner](ctx, procs, "burners")
		if err != nil {
			return err
		}
		first := b.At("hosts", 0)
		r0, r1 := first.At("gpus", 0), first.At("gpus", 1)
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := burn.CallOne(r1, 40).Get(ctx); err != nil {
				return ignoreEnd(ctx, err)
			}
			if _, err := spin.CallOne(r0, 5).Get(ctx); err != nil {
				return ignoreEnd(ctx, err)
			}
			if _, err := kick.CallOne(r0, 5).Get(ctx); err != nil {
				return ignoreEnd(ctx, err)
			}
			if i == 0 {
				fmt.Println("READY")
			}
		}
		return nil
	})
}

// ignoreEnd is err, unless the job is ending.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
