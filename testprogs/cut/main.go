// Command cut is a job program for the link-cut tests: it starts two procs
// on each of the job's hosts and sends them a stream of broadcasts, with a
// whole-mesh call every 50, for -for, while the test cuts a host's link.
// It prints "TRAFFIC" when the stream starts, and "LONGEST ms", the
// longest call, when it ends.
//
// Without -lose, every broadcast must reach every member exactly once: it
// prints "COUNTED n" and exits 0, or fails. With -lose (the link stays
// down past the host timeout), the stream stops at the first send that
// fails; the members on the last host must be reported failed, the others
// must have counted every broadcast sent and still answer: it prints
// "SURVIVED n" and exits 0, or fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Counter counts the broadcasts that reach it.
type Counter struct{ hits int }

func (c *Counter) Hit(ctx *actorrt.Context) error         { c.hits++; return nil }
func (c *Counter) Hits(ctx *actorrt.Context) (int, error) { return c.hits, nil }
func (c *Counter) Where(ctx *actorrt.Context) (string, error) {
	host, _ := os.Hostname()
	return host, nil
}

var (
	hit   = actorrt.VoidMethod((*Counter).Hit)
	hits  = actorrt.Method((*Counter).Hits)
	where = actorrt.Method((*Counter).Where)
)

var failures = make(chan *actorrt.MeshFailure, 16)

func main() {
	d := flag.Duration("for", 6*time.Second, "how long the stream goes on")
	lose := flag.Bool("lose", false, "the last host is cut for good: its members must fail, the others go on")
	if !actorrt.IsProc() {
		flag.Parse()
	}
	if err := actorrt.Register[Counter](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	actorrt.Main(func(ctx context.Context) error { return run(ctx, *d, *lose) },
		actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error {
			select {
			case failures <- f:
			default:
			}
			return nil // handled: the job goes on
		}))
}

func run(ctx context.Context, d time.Duration, lose bool) error {
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if err != nil {
		return err
	}
	n := hosts.Extent().NumRanks()
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		return err
	}
	c, err := actorrt.Spawn[Counter](ctx, procs, "counters")
	if err != nil {
		return err
	}
	if _, err := where.Call(c).Get(ctx); err != nil {
		return err
	}
	fmt.Println("TRAFFIC")
	sent, calls := 0, 0
	var longest time.Duration // a cut holds a call up
	var stopped error
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := hit.Broadcast(c); err != nil {
			stopped = fmt.Errorf("broadcast %d: %w", sent+1, err)
			break
		}
		sent++
		if sent%50 == 0 {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			t := time.Now()
			_, err := where.Call(c).Get(cctx)
			longest = max(longest, time.Since(t))
			cancel()
			if err != nil {
				stopped = fmt.Errorf("call after broadcast %d: %w", sent, err)
				break
			}
			calls++
		}
	}
	fmt.Printf("sent %d broadcasts and %d calls; %v\n", sent, calls, stopped)
	fmt.Println("LONGEST", longest.Milliseconds())
	if !lose {
		if stopped != nil {
			return stopped
		}
		if err := counted(ctx, c, sent); err != nil {
			return err
		}
		fmt.Println("COUNTED", sent)
		return nil
	}
	if !errors.Is(stopped, actorrt.ErrProcFailed) {
		return fmt.Errorf("the stream went on past the cut: %v", stopped)
	}
	select {
	case f := <-failures:
		if p, ok := f.Rank().Get("hosts"); !ok || p != n-1 {
			return fmt.Errorf("failure of %v, want one on host %d: %s", f.Rank(), n-1, f.Reason)
		}
		fmt.Println("failed:", f.Rank(), f.Reason)
	case <-time.After(time.Minute):
		return errors.New("no failure reported within a minute of the cut")
	}
	if err := counted(ctx, c.Slice("hosts", 0, n-1), sent); err != nil {
		return err
	}
	fmt.Println("SURVIVED", sent)
	return nil
}

// counted checks that every member of c counted sent broadcasts.
func counted(ctx context.Context, c *actorrt.ActorMesh[Counter], sent int) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	vm, err := hits.Call(c).Get(cctx)
	if err != nil {
		return fmt.Errorf("counting: %w", err)
	}
	for p, got := range vm.Items() {
		if got != sent {
			return fmt.Errorf("member %v counted %d of %d broadcasts", p, got, sent)
		}
	}
	return nil
}
