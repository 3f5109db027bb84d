// Command hubloss is the job program of TestRunHubServerKilled: on every
// host but the first (whose agent runs the hub's second server, which
// the test kills) it starts a proc with a Tally, and for -for streams
// numbered notes to them from the client; each Tally passes every note
// it gets from the client on to all Tallies as a numbered note of its
// own, so notes also cross between hosts, actor to actor. Every second
// it spawns a mesh more, on those procs (new subscriptions, which the
// hub's servers must all learn), calls it and stops it. It prints
// "TRAFFIC" once the stream runs, and at the end waits until every Tally
// has every note of every sender, each once and in order: it prints
// "DELIVERED <client notes> <notes between actors>", then "LONGEST
// <ms>", the longest call or spawn, or fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Tally checks the notes of each sender: numbered from 1, each once, in
// order.
type Tally struct {
	me    string
	peers *actorrt.ActorMesh[Tally]
	last  map[string]int
	sent  int
	bad   []string
}

// Report is what a Tally has seen: the last note of each sender, the
// notes it sent, and every note that came out of order or twice.
type Report struct {
	Me   string
	Last map[string]int
	Sent int
	Bad  []string
}

func (t *Tally) Init(ctx *actorrt.Context) error {
	t.me = ctx.ActorInstance().ID()
	t.last = map[string]int{}
	return nil
}

func (t *Tally) Meet(ctx *actorrt.Context, peers *actorrt.ActorMesh[Tally]) error {
	t.peers = peers
	return nil
}

func (t *Tally) Note(ctx *actorrt.Context, from string, n int) error {
	if want := t.last[from] + 1; n != want && len(t.bad) < 20 {
		t.bad = append(t.bad, fmt.Sprintf("%s got note %d of %s, want %d", t.me, n, from, want))
	}
	t.last[from] = max(t.last[from], n)
	if from == "client" && t.peers != nil {
		t.sent++
		return note.Broadcast(t.peers, t.me, t.sent)
	}
	return nil
}

func (t *Tally) Report(ctx *actorrt.Context) (Report, error) {
	last := make(map[string]int, len(t.last))
	for k, v := range t.last {
		last[k] = v
	}
	return Report{Me: t.me, Last: last, Sent: t.sent, Bad: append([]string(nil), t.bad...)}, nil
}

var (
	meet   = actorrt.VoidMethod1((*Tally).Meet)
	note   actorrt.Endpoint2[Tally, string, int, actorrt.Void] // Note sends notes: bound in init
	report = actorrt.Method((*Tally).Report)
)

func init() { note = actorrt.VoidMethod2((*Tally).Note) }

func main() {
	d := flag.Duration("for", 8*time.Second, "how long the stream goes on")
	if !actorrt.IsProc() {
		flag.Parse()
	}
	if err := actorrt.Register[Tally](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	actorrt.Main(func(ctx context.Context) error { return run(ctx, *d) })
}

func run(ctx context.Context, d time.Duration) error {
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if err != nil {
		return err
	}
	n := hosts.Extent().NumRanks()
	procs, err := hosts.Slice("hosts", 1, n).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		return err
	}
	tallies, err := actorrt.Spawn[Tally](ctx, procs, "tallies")
	if err != nil {
		return err
	}
	if err := call(ctx, meet.Call(tallies, tallies).Get); err != nil {
		return err
	}
	fmt.Println("TRAFFIC")
	var longest time.Duration
	sent, spawned := 0, 0
	nextSpawn := time.Now().Add(time.Second)
	for end := time.Now().Add(d); time.Now().Before(end); {
		sent++
		if err := note.Broadcast(tallies, "client", sent); err != nil {
			return fmt.Errorf("note %d: %w", sent, err)
		}
		if sent%20 == 0 {
			// A call now and then keeps the mailboxes short and times
			// the bus.
			start := time.Now()
			if err := call(ctx, report.Call(tallies).Get); err != nil {
				return fmt.Errorf("call after note %d: %w", sent, err)
			}
			longest = max(longest, time.Since(start))
		}
		if time.Now().After(nextSpawn) {
			start := time.Now()
			spawned++
			m, err := actorrt.Spawn[Tally](ctx, procs, fmt.Sprintf("more%d", spawned))
			if err != nil {
				return fmt.Errorf("spawn %d: %w", spawned, err)
			}
			if err := call(ctx, report.Call(m).Get); err != nil {
				return fmt.Errorf("call of spawn %d: %w", spawned, err)
			}
			if err := m.Stop(ctx); err != nil {
				return fmt.Errorf("stop of spawn %d: %w", spawned, err)
			}
			longest = max(longest, time.Since(start))
			nextSpawn = time.Now().Add(time.Second)
		}
		time.Sleep(2 * time.Millisecond)
	}
	between, err := delivered(ctx, tallies, sent)
	if err != nil {
		return err
	}
	fmt.Println("DELIVERED", sent, between)
	fmt.Println("LONGEST", longest.Milliseconds())
	return nil
}

// call waits for a call's result, for a minute at most.
func call[T any](ctx context.Context, get func(context.Context) (T, error)) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := get(cctx)
	return err
}

// delivered waits (a minute at most) until every Tally has all sent notes
// of the client and every note of every Tally, and none came out of
// order or twice; it returns the number of notes sent between Tallies.
func delivered(ctx context.Context, tallies *actorrt.ActorMesh[Tally], sent int) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		vm, err := report.Call(tallies).Get(cctx)
		cancel()
		if err != nil {
			return 0, err
		}
		var missing, bad []string
		sentBy := map[string]int{}
		between := 0
		for _, r := range vm.Values() {
			bad = append(bad, r.Bad...)
			between += r.Sent
		}
		for _, r := range vm.Values() {
			sentBy[r.Me] = r.Sent
		}
		for p, r := range vm.Items() {
			if r.Last["client"] != sent {
				missing = append(missing, fmt.Sprintf("%v: client %d of %d", p, r.Last["client"], sent))
			}
			for from, s := range sentBy {
				if r.Last[from] != s {
					missing = append(missing, fmt.Sprintf("%v: %s %d of %d", p, from, r.Last[from], s))
				}
			}
		}
		if len(bad) > 0 {
			return 0, fmt.Errorf("notes out of order or repeated: %s", strings.Join(bad, "; "))
		}
		if len(missing) == 0 {
			return between, nil
		}
		if time.Now().After(deadline) {
			sort.Strings(missing)
			return 0, fmt.Errorf("notes missing a minute after the stream ended: %s", strings.Join(missing, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
