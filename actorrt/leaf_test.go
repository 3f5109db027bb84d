package actorrt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Hosts on leaves. A program run directly with a "local" hosts file
// starts its simulated hosts as procs; each runs its own bus, a leaf of
// the client's (the job's hub), and the procs of that host dial it.

// Racer spawns procs and sends to them at once; Bus says what its proc
// dials.
type Racer struct{}

func (r *Racer) Bus(ctx *actorrt.Context) (string, error) {
	_, url, _ := actorrt.JobBus(ctx)
	return url, nil
}

func (r *Racer) Race(ctx *actorrt.Context, hosts *actorrt.HostMesh, rounds int) (int, error) {
	return race(ctx, hosts, rounds, "from "+ctx.ActorInstance().ID())
}

// race spawns two procs on hosts and a Counter on each, then at once
// broadcasts three increments and reads the counters: each must have
// counted three. A message sent before the new procs' subscriptions were
// known where it went would be dropped (a count short) or never
// answered (a timeout). It does that rounds times and returns the number
// of counters checked.
func race(ctx context.Context, hosts *actorrt.HostMesh, rounds int, who string) (int, error) {
	checked := 0
	for i := 0; i < rounds; i++ {
		procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
		if err != nil {
			return checked, err
		}
		counters, err := actorrt.Init1((*Counter).Init).Spawn(ctx, procs, fmt.Sprint("race", i), 0)
		if err != nil {
			procs.Stop(ctx)
			return checked, err
		}
		for range 3 {
			if err := actorrt.VoidMethod((*Counter).Increment).Broadcast(counters); err != nil {
				return checked, err
			}
		}
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		values, err := actorrt.Method((*Counter).GetValue).Call(counters).Get(callCtx)
		cancel()
		if err != nil {
			return checked, fmt.Errorf("%s, round %d: %w", who, i, err)
		}
		for p, v := range values.Items() {
			if v != 3 {
				return checked, fmt.Errorf("%s, round %d: counter %v counted %d of 3", who, i, p, v)
			}
			checked++
		}
		if err := procs.Stop(ctx); err != nil {
			return checked, err
		}
	}
	return checked, nil
}

// simulatedHosts starts n simulated hosts from a local hosts file.
func simulatedHosts(t testing.TB, ctx context.Context, n int) *actorrt.HostMesh {
	t.Helper()
	file := filepath.Join(t.TempDir(), "hosts.toml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("scheduler = \"local\"\n[local]\nhosts = %d\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MONARCH_TEST_LEAF_HOSTS", file)
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_TEST_LEAF_HOSTS")
	if err != nil {
		t.Fatal(err)
	}
	return hosts
}

// TestClientWatchesAgentsByWildcard: the client watches the heartbeats
// and links of every host agent with one subscription each, not two a
// host that the hub tells every leaf of (docs/scale.md, "At spawn:
// interest"); the hosts' procs still run, and a heartbeat is still
// taken as its host's (the job's live model hears it).
func TestClientWatchesAgentsByWildcard(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	hosts := simulatedHosts(t, ctx, 4)
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer procs.Stop(ctx)
	if hb, links := actorrt.HubAgentWatches(rootCtx(t)); hb != 1 || links != 1 {
		t.Fatalf("the hub holds %d subscriptions to agents' heartbeats and %d to their links, want 1 and 1", hb, links)
	}
	var heard []string
	for deadline := time.Now().Add(20 * time.Second); len(heard) < 4 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, err := actorrt.ClientState(rootCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		heard = heard[:0]
		for _, h := range st.Hosts {
			if !h.LastHeartbeat.IsZero() {
				heard = append(heard, h.Agent)
			}
		}
	}
	if len(heard) < 4 {
		t.Fatalf("the client heard the heartbeats of %v only, want the 4 hosts'", heard)
	}
}

// TestSimulatedHostsOnLeaves: each simulated host is a leaf of the
// client's bus, and its procs dial that leaf: the hub holds one leaf
// connection more per host, procs of one host share a bus, procs of two
// hosts do not, and none dials the hub.
func TestSimulatedHostsOnLeaves(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	before := actorrt.HubLeafNodes(rootCtx(t))
	start := time.Now()
	hosts := simulatedHosts(t, ctx, 3)
	t.Logf("3 simulated hosts with their leaves up in %v", time.Since(start).Round(time.Millisecond))
	if got := actorrt.HubLeafNodes(rootCtx(t)) - before; got != 3 {
		t.Fatalf("the hub holds %d more leaf connections, want 3 (one per host)", got)
	}
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer procs.Stop(ctx)
	racers, err := actorrt.Spawn[Racer](ctx, procs, "where")
	if err != nil {
		t.Fatal(err)
	}
	urls, err := actorrt.Method((*Racer).Bus).Call(racers).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, hub, _ := actorrt.JobBus(rootCtx(t))
	byHost := map[int]string{}
	seen := map[string]int{}
	for p, u := range urls.Items() {
		h, _ := p.Get("hosts")
		switch {
		case u == hub:
			t.Errorf("proc %v dials the hub %s", p, u)
		case byHost[h] == "":
			if other, dup := seen[u]; dup {
				t.Errorf("hosts %d and %d share the bus %s", other, h, u)
			}
			byHost[h], seen[u] = u, h
		case byHost[h] != u:
			t.Errorf("procs of host %d dial %s and %s", h, byHost[h], u)
		}
	}
	if len(byHost) != 3 {
		t.Errorf("buses by host: %v", byHost)
	}
	// A proc's own procs (ThisHost(ctx) in an actor) dial what it dials.
	starter, err := actorrt.Spawn[Starter](ctx, procs.Slice("hosts", 2, 3).Slice("gpus", 0, 1), "starter")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := actorrt.Method((*Starter).Start).CallOne(starter).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	innerRacers, err := actorrt.Spawn[Racer](ctx, inner, "inner")
	if err != nil {
		t.Fatal(err)
	}
	if u, err := actorrt.Method((*Racer).Bus).CallOne(innerRacers).Get(ctx); err != nil || u != byHost[2] {
		t.Errorf("a proc of a proc of host 2 dials %q (%v), want its host's %s", u, err, byHost[2])
	}
}

// TestInterestRaceAcrossHosts: procs spawned on one simulated host take
// messages sent the moment they are ready, from the client (on the hub)
// and from an actor on another host (on another leaf), at the same time.
func TestInterestRaceAcrossHosts(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	hosts := simulatedHosts(t, ctx, 2)
	target := hosts.Slice("hosts", 0, 1)
	onOther, err := hosts.Slice("hosts", 1, 2).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer onOther.Stop(ctx)
	racer, err := actorrt.Spawn[Racer](ctx, onOther, "racer")
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 25
	start := time.Now()
	remote := actorrt.Method2((*Racer).Race).CallOne(racer, target, rounds)
	local, err := race(ctx, target, rounds, "from the client")
	if err != nil {
		t.Fatal(err)
	}
	far, err := remote.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if local != 2*rounds || far != 2*rounds {
		t.Fatalf("counters checked: %d from the client, %d from the other host; want %d each", local, far, 2*rounds)
	}
	t.Logf("%d rounds from each side: %v", rounds, time.Since(start).Round(time.Millisecond))
}
