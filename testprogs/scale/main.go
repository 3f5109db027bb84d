// Command scale is the job program of the scale test and benchmark: on
// the job's hosts (monarch local --hosts N), it spawns procs and actors,
// then measures and checks what a large job does: spawn, whole-mesh
// calls, calls to a one-member slice beside a one-actor mesh, a broadcast
// flood counted exactly, and a proc killed with SIGKILL, reported to the
// mesh's owner. It prints one line per figure, "METRIC name value", and
// "OK" at the end; a check that fails is an error (exit 1).
//
//	monarch local --hosts 16 -- scale -procs 4 -actors 4 -flood 20000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Worker counts what reaches it.
type Worker struct{ hits int }

func (w *Worker) Hit(ctx *actorrt.Context) error         { w.hits++; return nil }
func (w *Worker) Hits(ctx *actorrt.Context) (int, error) { return w.hits, nil }
func (w *Worker) Ping(ctx *actorrt.Context) (int, error) { return os.Getpid(), nil }
func (w *Worker) Die(ctx *actorrt.Context) error {
	return syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

var (
	hit  = actorrt.VoidMethod((*Worker).Hit)
	hits = actorrt.Method((*Worker).Hits)
	ping = actorrt.Method((*Worker).Ping)
	die  = actorrt.VoidMethod((*Worker).Die)
)

// failures gets what reaches the client's fault hook.
var failures = make(chan *actorrt.MeshFailure, 1024)

func main() {
	if err := actorrt.Register[Worker](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var o opts
	if !actorrt.IsProc() {
		flag.IntVar(&o.procs, "procs", 4, "procs per host")
		flag.IntVar(&o.actors, "actors", 4, "actors per proc")
		flag.IntVar(&o.calls, "calls", 200, "whole-mesh calls and slice calls to time")
		flag.IntVar(&o.flood, "flood", 20000, "broadcasts in the flood")
		flag.BoolVar(&o.kill, "kill", true, "kill one proc and check its owner hears of it")
		flag.Parse()
	}
	actorrt.Main(func(ctx context.Context) error { return run(ctx, o) },
		actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error {
			select {
			case failures <- f:
			default:
			}
			return nil
		}))
}

type opts struct {
	procs, actors, calls, flood int
	kill                        bool
}

func metric(name string, v any) { fmt.Printf("METRIC %s %v\n", name, v) }

// machineCPU is the CPU time this machine has spent busy, all cores, in
// seconds (/proc/stat; 0 where it cannot be read): simulated hosts share
// it, so a difference is what a step cost them all.
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy / 100 // USER_HZ
}

func run(ctx context.Context, o opts) error {
	start := time.Now()
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if err != nil {
		return err
	}
	nhosts := hosts.Extent().NumRanks()
	metric("hosts-up-s", time.Since(start).Seconds())

	t0, cpu0 := time.Now(), machineCPU()
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"procs", o.procs}})
	if err != nil {
		return err
	}
	metric("spawn-procs-s", time.Since(t0).Seconds())
	metric("spawn-procs-cpu-s", machineCPU()-cpu0)
	workers, err := actorrt.SpawnPerProc[Worker](ctx, procs, "workers", actorrt.Dims{{"actors", o.actors}})
	if err != nil {
		return err
	}
	single, err := actorrt.Spawn[Worker](ctx, procs.Slice("hosts", nhosts-1, nhosts).Slice("procs", 0, 1), "single")
	if err != nil {
		return err
	}
	metric("spawn-s", time.Since(t0).Seconds())
	members := workers.Extent().NumRanks()
	metric("procs", procs.Extent().NumRanks())
	metric("actors", members)

	// Whole-mesh calls.
	lat := make([]time.Duration, 0, o.calls)
	for range o.calls {
		t := time.Now()
		vm, err := ping.Call(workers).Get(ctx)
		if err != nil {
			return fmt.Errorf("whole-mesh call: %w", err)
		}
		if vm.Len() != members {
			return fmt.Errorf("whole-mesh call: %d answers of %d", vm.Len(), members)
		}
		lat = append(lat, time.Since(t))
	}
	metric("call-p50-us", percentile(lat, 50).Microseconds())
	metric("call-p99-us", percentile(lat, 99).Microseconds())

	// One member of the big mesh, beside a mesh of one actor on the same
	// proc.
	one := workers.At("hosts", nhosts-1).At("procs", 0).At("actors", 0)
	sliceLat, singleLat := make([]time.Duration, 0, o.calls), make([]time.Duration, 0, o.calls)
	for range o.calls {
		t := time.Now()
		if _, err := ping.CallOne(one).Get(ctx); err != nil {
			return fmt.Errorf("one-member slice: %w", err)
		}
		sliceLat = append(sliceLat, time.Since(t))
		t = time.Now()
		if _, err := ping.CallOne(single).Get(ctx); err != nil {
			return fmt.Errorf("one-actor mesh: %w", err)
		}
		singleLat = append(singleLat, time.Since(t))
	}
	metric("slice-p50-us", percentile(sliceLat, 50).Microseconds())
	metric("single-p50-us", percentile(singleLat, 50).Microseconds())

	// A broadcast flood, counted exactly by every member.
	t0 = time.Now()
	for range o.flood {
		if err := hit.Broadcast(workers); err != nil {
			return fmt.Errorf("flood: %w", err)
		}
	}
	counts, err := hits.Call(workers).Get(ctx)
	if err != nil {
		return fmt.Errorf("counting the flood: %w", err)
	}
	d := time.Since(t0)
	for p, n := range counts.Items() {
		if n != o.flood {
			return fmt.Errorf("member %v counted %d of %d broadcasts", p, n, o.flood)
		}
	}
	metric("flood-s", d.Seconds())
	metric("flood-deliveries-per-s", int(float64(o.flood*members)/d.Seconds()))

	if o.kill {
		// A member's proc killed: its owner (this client) hears of it.
		victim := workers.At("hosts", 0).At("procs", 0).At("actors", 0)
		t0 = time.Now()
		if err := die.Broadcast(victim); err != nil {
			return err
		}
		deadline := time.After(30 * time.Second)
		for heard := false; !heard; {
			select {
			case f := <-failures:
				heard = f.Mesh == "workers"
			case <-deadline:
				return errors.New("the killed proc's failure did not reach its owner within 30s")
			}
		}
		metric("kill-reported-ms", time.Since(t0).Milliseconds())
	}
	fmt.Println("OK")
	metric("done-unix-ms", time.Now().UnixMilli())
	return nil
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
