// Command meshes is a job program for the log and failure tests: it
// prints lines of its own (stdout and stderr), starts two proc meshes,
// "trainer" (2 procs) and "gen" (1), whose actors each print a line, and
// returns. With MESHES_FAIL=1 the gen actor then panics after a
// Broadcast: a failure nobody handles, which ends the client through the
// default fault hook. With MESHES_QUICK=1 it prints one line and returns
// an error at once, starting nothing.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/monarch-go/monarch/actorrt"
)

// Speaker prints what it is told, in its proc.
type Speaker struct{}

func (s *Speaker) Say(ctx *actorrt.Context, what string) error {
	fmt.Println(what)
	return nil
}

func (s *Speaker) Fail(ctx *actorrt.Context) error {
	fmt.Fprintln(os.Stderr, "gen: about to fail")
	panic("gen fails on purpose")
}

var (
	say  = actorrt.VoidMethod1((*Speaker).Say)
	fail = actorrt.VoidMethod((*Speaker).Fail)
)

func main() {
	if err := actorrt.Register[Speaker](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	actorrt.Main(run)
}

func run(ctx context.Context) error {
	if os.Getenv("MESHES_QUICK") == "1" {
		fmt.Println("client: quick result 42")
		return errors.New("quick failure")
	}
	fmt.Println("client: starting")
	fmt.Fprintln(os.Stderr, "client: a line on stderr")
	trainer, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithName("trainer"))
	if err != nil {
		return err
	}
	gen, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}}, actorrt.WithName("gen"))
	if err != nil {
		return err
	}
	for _, m := range []struct {
		procs *actorrt.ProcMesh
		what  string
	}{{trainer, "training"}, {gen, "generating"}} {
		s, err := actorrt.Spawn[Speaker](ctx, m.procs, m.procs.Name())
		if err != nil {
			return err
		}
		if _, err := say.Call(s, m.what).Get(ctx); err != nil {
			return err
		}
		if err := m.procs.FlushLogs(ctx); err != nil { // printed in this order
			return err
		}
		if os.Getenv("MESHES_FAIL") == "1" && m.procs == gen {
			fail.Broadcast(s)
			<-ctx.Done() // the fault hook ends the client
			return ctx.Err()
		}
	}
	if err := trainer.FlushLogs(ctx); err != nil {
		return err
	}
	if err := gen.FlushLogs(ctx); err != nil {
		return err
	}
	fmt.Println("client: done")
	return nil
}
