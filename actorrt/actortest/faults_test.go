package actortest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/actortest"
)

// spawnCounters spawns a mesh of counters (starting at 0) on hosts x per
// procs of c, without a restart policy: their failures reach the client.
func spawnCounters(t *testing.T, c *actortest.Cluster, per int) (context.Context, *actorrt.ProcMesh, *actorrt.ActorMesh[Counter]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	t.Cleanup(cancel)
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", per}})
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := counters.Spawn(ctx, procs, "counters", 0)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, procs, mesh
}

// nextFailure waits for the next failure that reached the client.
func nextFailure(t *testing.T, ctx context.Context, c *actortest.Cluster) *actorrt.MeshFailure {
	t.Helper()
	select {
	case f := <-c.Failures():
		return f
	case <-ctx.Done():
		t.Fatal("no failure reached the client")
		return nil
	}
}

// TestKillReportsToOwner: a killed proc's member, in a mesh with no
// restart policy, reaches its owner (the client's fault hook) as a
// failure naming the kill, and a call to it fails with ErrProcFailed.
func TestKillReportsToOwner(t *testing.T) {
	c := actortest.Start(t, 2)
	ctx, procs, mesh := spawnCounters(t, c, 2)
	if err := c.Kill(procs.Slice("hosts", 1, 2).Slice("gpus", 0, 1)); err != nil {
		t.Fatal(err)
	}
	f := nextFailure(t, ctx, c)
	if f.Mesh != "counters" || !errorContains(f, "killed by SIGKILL") {
		t.Fatalf("failure %v: want one of mesh counters naming the kill", f)
	}
	if _, err := add.Call(mesh, 1).Get(ctx); !errors.Is(err, actorrt.ErrProcFailed) {
		t.Fatalf("a call to a mesh with a killed member: %v, want ErrProcFailed", err)
	}
}

// TestLoseHost: a lost host's procs fail at once, told by the agent
// that started the host (the client's), not at the host timeout, which
// is left long here to show it: the members of the actor mesh on them,
// and the procs of the proc mesh.
func TestLoseHost(t *testing.T) {
	c := actortest.Start(t, 3, actorrt.WithHostTimeout(time.Minute))
	ctx, procs, mesh := spawnCounters(t, c, 2)
	if err := c.LoseHost(1); err != nil {
		t.Fatal(err)
	}
	members, lost := 0, 0
	for members < 2 || lost < 2 {
		f := nextFailure(t, ctx, c)
		switch {
		case f.Mesh == "counters" && !f.ProcLost && f.Coords[0] == 1:
			members++
		case f.Mesh == procs.Name() && f.ProcLost && f.Coords[0] == 1:
			lost++
		default:
			t.Fatalf("failure %v: want one of mesh counters or proc mesh %s, on host 1", f, procs.Name())
		}
	}
	if _, err := add.Call(mesh.Slice("hosts", 0, 1), 1).Get(ctx); err != nil {
		t.Fatalf("a call to the members of a host left: %v", err)
	}
	if err := c.LoseHost(7); err == nil {
		t.Fatal("LoseHost of a host the cluster does not have was not refused")
	}
}

// TestCutAndHeal: calls to a host whose link is cut wait, and are
// answered once it heals (well within the link grace): nothing is lost.
func TestCutAndHeal(t *testing.T) {
	c := actortest.Start(t, 2)
	ctx, _, mesh := spawnCounters(t, c, 2)
	if err := c.CutHost(1); err != nil {
		t.Fatal(err)
	}
	fut := add.Call(mesh, 1)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := fut.Get(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call across a cut link: %v, want it still waiting", err)
	}
	if err := c.HealHost(1); err != nil {
		t.Fatal(err)
	}
	vm, err := fut.Get(ctx)
	if err != nil {
		t.Fatalf("the call once healed: %v", err)
	}
	for r, v := range vm.Values() {
		if v != 1 {
			t.Fatalf("member %d counted %d, want 1: %v", r, v, vm.Values())
		}
	}
}

// TestDelayIsNotDeath: a host whose link is late by less than the host
// timeout is late, not lost: its members answer, late, and nothing
// fails.
func TestDelayIsNotDeath(t *testing.T) {
	c := actortest.Start(t, 2, actorrt.WithHostTimeout(2*time.Second))
	ctx, _, mesh := spawnCounters(t, c, 2)
	if err := c.DelayHost(1, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := add.Call(mesh, 1).Get(ctx); err != nil {
			t.Fatalf("a call to a late host: %v", err)
		}
	}
	select {
	case f := <-c.Failures():
		t.Fatalf("a late host failed: %v", f)
	default:
	}
	if err := c.DelayHost(1, 0); err != nil {
		t.Fatal(err)
	}
}

// TestCloseLeavesNothing: a cluster that ran, killed a proc and lost a
// host leaves no goroutine and no file descriptor once closed.
func TestCloseLeavesNothing(t *testing.T) {
	goroutines, fds := runtime.NumGoroutine(), openFiles(t)
	c, err := actortest.New(3)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		ctx, procs, mesh := spawnCounters(t, c, 2)
		if _, err := add.Call(mesh, 1).Get(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Kill(procs.Slice("hosts", 0, 1).Slice("gpus", 0, 1)); err != nil {
			t.Fatal(err)
		}
		if err := c.LoseHost(2); err != nil {
			t.Fatal(err)
		}
		nextFailure(t, ctx, c)
	}()
	closing := time.Now()
	c.Close()
	t.Logf("closed in %v", time.Since(closing))
	c.Close() // idempotent
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		g, f := runtime.NumGoroutine(), openFiles(t)
		if g <= goroutines && f <= fds {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("after Close: %d goroutines (%d before), %d open files (%d before)\n%s", g, goroutines, f, fds, buf[:runtime.Stack(buf, true)])
		}
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

func errorContains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// TestProgramHostsApart: simulated hosts the program starts itself
// (HostsFromConfig, named h0, h1, ... too) leave the cluster's own hosts
// alone: their links stay up, and LoseHost(0) is the cluster's host 0.
func TestProgramHostsApart(t *testing.T) {
	c := actortest.Start(t, 1)
	ctx, _, mesh := spawnCounters(t, c, 2)
	file := filepath.Join(t.TempDir(), "hosts.toml")
	if err := os.WriteFile(file, []byte("scheduler = \"local\"\n[local]\nhosts = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ACTORTEST_HOSTS", file)
	own, err := actorrt.HostsFromConfig(ctx, "ACTORTEST_HOSTS")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := counters.Spawn(ctx, mustSpawnProcs(t, ctx, own), "theirs", 0)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, m := range []*actorrt.ActorMesh[Counter]{mesh, theirs} {
		if _, err := add.Call(m, 1).Get(short); err != nil {
			t.Fatalf("a call to %v after the program started its hosts: %v", m, err)
		}
	}
	if err := c.LoseHost(0); err != nil {
		t.Fatal(err)
	}
	if _, err := add.Call(theirs, 1).Get(short); err != nil {
		t.Fatalf("the program's hosts after the cluster's host 0 was lost: %v", err)
	}
}

func mustSpawnProcs(t *testing.T, ctx context.Context, hosts *actorrt.HostMesh) *actorrt.ProcMesh {
	t.Helper()
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		t.Fatal(err)
	}
	return procs
}

// TestProcMeshSupervised: a proc mesh with no actor on it is supervised
// too: a proc of it killed is a failure of the mesh (ProcLost) for its
// owner, the client's fault hook; a proc stopped on request is none.
func TestProcMeshSupervised(t *testing.T) {
	c := actortest.Start(t, 2)
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithName("idle"))
	if err != nil {
		t.Fatal(err)
	}
	if err := procs.At("hosts", 0).At("gpus", 1).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(procs.At("hosts", 1).At("gpus", 0)); err != nil {
		t.Fatal(err)
	}
	f := nextFailure(t, ctx, c)
	if !f.ProcLost || f.Mesh != "idle" || f.ActorID != "" || !slices.Equal(f.Coords, []int{1, 0}) || !strings.Contains(f.Reason, "killed by SIGKILL") {
		t.Fatalf("failure %+v: want proc {hosts: 1, gpus: 0} of proc mesh idle lost, killed by SIGKILL", f)
	}
	if !strings.HasPrefix(f.Error(), "proc mesh idle: proc ") {
		t.Fatalf("failure %q: want it to name the proc mesh", f.Error())
	}
	select {
	case f := <-c.Failures():
		t.Fatalf("a second failure: %v (the stop on request is none)", f)
	case <-time.After(100 * time.Millisecond):
	}
}

// slotReached is a remote function: its proc answers.
var slotReached = actorrt.Remote("actortest_slot_reached", func(context.Context) (bool, error) { return true, nil })

// TestRemoteWhileSlotReplaced: a remote function called on a proc mesh
// while a proc of it that was killed waits for its replacement (its
// policy's backoff) fails at once, naming the restart, not the kill
// alone; once the slot's next incarnation is up, the same ProcMesh
// reaches it.
func TestRemoteWhileSlotReplaced(t *testing.T) {
	c := actortest.Start(t, 1)
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	policy := actorrt.RestartPolicy{MaxRestarts: 1, Window: time.Minute, Backoff: time.Second, MaxBackoff: time.Second}
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithProcRestart(policy))
	if err != nil {
		t.Fatal(err)
	}
	// Both answer first: the slot is up before it is killed.
	if _, err := slotReached.Call(procs).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(procs.At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	named := false
	for {
		v, err := slotReached.Call(procs).Get(ctx)
		if err == nil {
			if v.Len() != 2 || v.Missing() != nil {
				t.Fatalf("after the replacement: %v", v)
			}
			break
		}
		switch {
		case ctx.Err() != nil:
			t.Fatalf("the slot was not replaced: %v", err)
		case !errors.Is(err, actorrt.ErrProcFailed):
			t.Fatalf("a call while the slot is replaced: %v, want ErrProcFailed", err)
		case strings.Contains(err.Error(), "starting a proc in its place"):
			named = true
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !named {
		t.Fatal("no call made during the policy's backoff named the restart")
	}
}

// TestProcMeshRestart: a proc mesh with a restart policy of its own
// (WithProcRestart) replaces a proc that is killed: the actors that were
// on it fail to their owner (their mesh has no policy), the proc mesh's
// loss does not, and the mesh's slot is the new proc, where a new mesh is
// spawned and answers. Past the policy's limit, the loss goes to the
// owner.
func TestProcMeshRestart(t *testing.T) {
	c := actortest.Start(t, 2)
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	policy := actorrt.RestartPolicy{MaxRestarts: 1, Window: time.Minute}
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithName("kept"), actorrt.WithProcRestart(policy))
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := counters.Spawn(ctx, procs, "counters", 0)
	if err != nil {
		t.Fatal(err)
	}
	slot := procs.At("hosts", 1).At("gpus", 1)
	if err := c.Kill(slot); err != nil {
		t.Fatal(err)
	}
	if f := nextFailure(t, ctx, c); f.Mesh != "counters" || f.ProcLost {
		t.Fatalf("failure %v: want the member of counters on the killed proc", f)
	}
	// The slot answers again: a mesh spawned there once it is replaced.
	var again *actorrt.ActorMesh[Counter]
	for again == nil {
		again, err = counters.Spawn(ctx, slot, "again", 5)
		if err != nil && !errors.Is(err, actorrt.ErrProcFailed) {
			t.Fatalf("a spawn on the slot being replaced: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("the slot was not replaced: %v", err)
		}
		if again == nil {
			time.Sleep(time.Millisecond)
		}
	}
	if v, err := value.Call(again).Get(ctx); err != nil || v.Values()[0] != 5 {
		t.Fatalf("the mesh on the replaced slot: %v, %v; want 5", v, err)
	}
	if _, err := add.Call(mesh.Slice("hosts", 0, 1), 1).Get(ctx); err != nil {
		t.Fatalf("the members on the other procs: %v", err)
	}
	select {
	case f := <-c.Failures():
		t.Fatalf("a failure after the replacement: %v", f)
	case <-time.After(100 * time.Millisecond):
	}
	// The policy allows one replacement in its window: a second kill of
	// the slot is the proc mesh's loss, for its owner.
	if err := c.Kill(slot); err != nil {
		t.Fatal(err)
	}
	for {
		f := nextFailure(t, ctx, c)
		if f.Mesh == "again" {
			continue
		}
		if !f.ProcLost || f.Mesh != "kept" || !strings.Contains(f.Reason, "not restarted") {
			t.Fatalf("failure %v: want the proc mesh's loss, past its policy", f)
		}
		break
	}
}

// TestProcEndsOfEveryIncarnation: ProcMesh.Ends delivers the end of every
// proc of every slot once, the procs started in ended ones' places too,
// each naming its slot and incarnation: a slot killed twice and replaced
// by the mesh's policy, then the mesh stopped, is four ends for a mesh of
// two slots (whose channel holds two), in the order they happened.
func TestProcEndsOfEveryIncarnation(t *testing.T) {
	c := actortest.Start(t, 1)
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	policy := actorrt.RestartPolicy{MaxRestarts: 5, Window: time.Minute}
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithName("incarnations"), actorrt.WithProcRestart(policy))
	if err != nil {
		t.Fatal(err)
	}
	slot := procs.At("hosts", 0).At("gpus", 1)
	for i := range 2 {
		if err := c.Kill(slot); err != nil {
			t.Fatal(err)
		}
		// Replaced once a mesh spawns there.
		for {
			m, err := counters.Spawn(ctx, slot, "incarnation", i)
			if err == nil {
				m.Stop(ctx)
				break
			}
			if !errors.Is(err, actorrt.ErrProcFailed) || ctx.Err() != nil {
				t.Fatalf("a spawn on the slot being replaced: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	type end struct {
		coords      []int
		incarnation int
		stopped     bool
	}
	want := []end{{[]int{0, 1}, 0, false}, {[]int{0, 1}, 1, false}}
	var got, stops []end
	seen := map[string]bool{}
	for len(got)+len(stops) < 4 {
		select {
		case e := <-procs.Ends():
			if seen[e.Proc] || e.Dropped != 0 {
				t.Fatalf("end %v: a second end of %s, or %d dropped", e, e.Proc, e.Dropped)
			}
			seen[e.Proc] = true
			g := end{e.Point.Coords(), e.Incarnation, e.Stopped}
			if e.Stopped {
				stops = append(stops, g)
			} else {
				got = append(got, g)
			}
		case <-ctx.Done():
			t.Fatalf("ends %v then %v (stopped); want %v, then the stops of both slots' newest procs", got, stops, want)
		}
	}
	slices.SortFunc(stops, func(a, b end) int { return slices.Compare(a.coords, b.coords) })
	want = append(want, end{[]int{0, 0}, 0, true}, end{[]int{0, 1}, 2, true})
	if g := append(got, stops...); !reflect.DeepEqual(g, want) {
		t.Fatalf("ends %v; want %v", g, want)
	}
	select {
	case e := <-procs.Ends():
		t.Fatalf("a fifth end: %v", e)
	case <-time.After(100 * time.Millisecond):
	}
}
