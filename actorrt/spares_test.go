package actorrt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// spares lists the pids of this process's children started as spares
// (MONARCH_SPARE=1 in the environment they started with, which a spare
// taking a slot keeps), but those in taken.
func spares(t *testing.T, taken ...int) []int { return sparesOf(t, os.Getpid(), taken...) }

// sparesOf lists the spares whose parent is pid parent, but those in
// taken.
func sparesOf(t *testing.T, parent int, taken ...int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || slices.Contains(taken, pid) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The parent's pid is the second field after the command's ")".
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) || f[0] == "Z" {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), "MONARCH_SPARE=1") {
			out = append(out, pid)
		}
	}
	return out
}

// waitSpares waits until n spares, not in taken, run, and returns their
// pids.
func waitSpares(t *testing.T, n int, taken ...int) []int {
	t.Helper()
	return waitSparesOf(t, os.Getpid(), n, taken...)
}

// waitSparesOf waits until n spares of parent, not in taken, run, and
// returns their pids.
func waitSparesOf(t *testing.T, parent, n int, taken ...int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := sparesOf(t, parent, taken...)
		if len(s) == n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spares run (%v), want %d", len(s), s, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSpareTakesKilledSlot: a proc of a mesh kept with a spare per host
// hosts members of two meshes with restart policies and is killed; the
// spare takes its slot: both meshes' members answer again from the
// spare's pid, which has the slot's variables (its rank, torchrun's, the
// user's WithProcEnv), the ProcMesh reaches it, nobody hears of a
// failure, and the pool is refilled to one idle spare. Stopping the proc
// mesh stops its procs and its spares.
func TestSpareTakesKilledSlot(t *testing.T) {
	ctx := testCtx(t)
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithSpares(1),
		actorrt.WithProcEnv(func(p actorrt.Point) []string {
			g, _ := p.Get("gpus")
			return []string{fmt.Sprintf("SLOT_TAG=slot-%d", g)}
		}))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			procs.Stop(context.WithoutCancel(ctx))
		}
	})
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	var meshes []*actorrt.ActorMesh[Phoenix]
	for _, name := range []string{"spare-a", "spare-b"} {
		m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, name, actorrt.SpawnOptions{Restart: &policy}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		meshes = append(meshes, m)
	}
	spare := waitSpares(t, 1)[0]
	befores := [][]int64{nonces(t, meshes[0]), nonces(t, meshes[1])}
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(meshes[0].At("gpus", 1)); err != nil {
		t.Fatal(err)
	}
	movedToSpare(t, meshes, befores, procs, "gpus", spare,
		"MONARCH_RANK_GPUS=1", "RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2", "SLOT_TAG=slot-1", "CUDA_VISIBLE_DEVICES=1")
	assertNoFailure(t, "spare-a")
	assertNoFailure(t, "spare-b")
	refill := waitSpares(t, 1, spare)
	stopped = true
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, append(refill, spare))
	if left := spares(t); len(left) != 0 {
		t.Fatalf("spares left after their mesh stopped: %v", left)
	}
}

// TestSparesRefused: WithSpares is refused, saying why, with a command
// or a wrapper (neither can take its rank late) and past its bound.
func TestSparesRefused(t *testing.T) {
	ctx := testCtx(t)
	for _, tt := range []struct {
		name string
		opts []actorrt.ProcOption
		want string
	}{
		{"a command", []actorrt.ProcOption{actorrt.WithSpares(1), actorrt.WithCommand("true")}, "cannot take its rank late"},
		{"a wrapper", []actorrt.ProcOption{actorrt.WithSpares(1), actorrt.WithWrapper(func(actorrt.Point) []string { return []string{"nice"} })}, "cannot take its rank late"},
		{"too many", []actorrt.ProcOption{actorrt.WithSpares(65)}, "WithSpares(65): want 0 to 64"},
		{"negative", []actorrt.ProcOption{actorrt.WithSpares(-1)}, "WithSpares(-1)"},
	} {
		_, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}}, tt.opts...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
		if tt.name == "a command" && !errors.Is(err, actorrt.ErrBadArgs) {
			t.Errorf("%s: %v is not ErrBadArgs", tt.name, err)
		}
	}
}

var ppidFn = actorrt.Remote("test_ppid", func(ctx context.Context) (int, error) { return os.Getppid(), nil })

// TestLostHostSlotsToSpares: two simulated hosts (procs of this machine,
// each with its agent), a proc mesh with a spare per host, two meshes
// with restart policies on it; host 1's agent is killed (SIGKILL), its
// procs with it. WithSparesAnyHost: host 0's spare takes the slot, with
// its rank variables; both meshes answer again from it, the ProcMesh's
// slot reaches it, nobody hears of a failure. Without: the owner hears
// of each member of host 1, its restart failed as its host is gone.
func TestLostHostSlotsToSpares(t *testing.T) {
	for _, anyHost := range []bool{true, false} {
		t.Run(fmt.Sprintf("anyhost=%v", anyHost), func(t *testing.T) {
			ctx := testCtx(t)
			hosts := simulatedHosts(t, ctx, 2)
			opts := []actorrt.ProcOption{actorrt.WithSpares(1)}
			if anyHost {
				opts = append(opts, actorrt.WithSparesAnyHost())
			}
			procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var hostPids []int
			for i := range 2 {
				v, err := ppidFn.Call(procs.At("hosts", i)).Get(ctx)
				if err != nil {
					t.Fatal(err)
				}
				hostPids = append(hostPids, v.Values()[0])
			}
			t.Cleanup(func() {
				procs.Stop(context.WithoutCancel(ctx))
				for _, pid := range hostPids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				waitGone(t, hostPids)
			})
			names := []string{fmt.Sprintf("lost-a-%v", anyHost), fmt.Sprintf("lost-b-%v", anyHost)}
			policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
			var meshes []*actorrt.ActorMesh[Phoenix]
			for _, name := range names {
				m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, name, actorrt.SpawnOptions{Restart: &policy}, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				meshes = append(meshes, m)
			}
			spare := waitSparesOf(t, hostPids[0], 1)[0]
			befores := [][]int64{nonces(t, meshes[0]), nonces(t, meshes[1])}
			if err := syscall.Kill(hostPids[1], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if !anyHost {
				for _, name := range names {
					f := waitFailure(t, name)
					if f.Base != 1 || !strings.Contains(f.Reason, "its restart failed") || !strings.Contains(f.Reason, "its host is gone") {
						t.Fatalf("failure %v: want member 1's, its restart failed as its host is gone", f)
					}
				}
				return
			}
			movedToSpare(t, meshes, befores, procs, "hosts", spare, "MONARCH_RANK_HOSTS=1", "RANK=1")
			for _, name := range names {
				assertNoFailure(t, name)
			}
		})
	}
}

// movedToSpare waits until member 1 (along dim) of each of meshes is a
// new instance (its nonce not the one in befores), member 0 the same,
// and checks that it runs on spare (a pid) with the slot's variables
// vars, and that procs' slot 1 is that proc too.
func movedToSpare(t *testing.T, meshes []*actorrt.ActorMesh[Phoenix], befores [][]int64, procs *actorrt.ProcMesh, dim string, spare int, vars ...string) {
	t.Helper()
	ctx := testCtx(t)
	where := actorrt.Method1((*Phoenix).Where)
	for i, m := range meshes {
		before := befores[i]
		after := waitNonces(t, m, func(n []int64) bool { return n[1] != before[1] })
		if after[0] != before[0] {
			t.Fatalf("%s: nonces %v then %v: want member 0 the same instance", m.Name(), before, after)
		}
		for _, v := range vars {
			name, _, _ := strings.Cut(v, "=")
			w, err := where.CallOne(m.At(dim, 1), name).Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("pid=%d %s", spare, v); w != want {
				t.Fatalf("%s member 1: %q, want %q (the spare, with the slot's variable)", m.Name(), w, want)
			}
		}
	}
	if pid, err := pidFn.Call(procs.At(dim, 1)).Get(ctx); err != nil || pid.Values()[0] != spare {
		t.Fatalf("the proc mesh's slot 1: %v, %v; want the spare, pid %d", pid, err, spare)
	}
}

// TestIdleSpareDiesReplaced: an idle spare that dies (SIGKILL) is
// replaced in its pool by another, and nobody hears of a failure: it was
// no rank of anyone's.
func TestIdleSpareDiesReplaced(t *testing.T) {
	ctx := testCtx(t)
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}}, actorrt.WithSpares(1), actorrt.WithProcRestart(actorrt.DefaultRestartPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	spare := waitSpares(t, 1)[0]
	if err := syscall.Kill(spare, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, []int{spare})
	next := waitSpares(t, 1, spare)
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, next)
	failures.mu.Lock()
	defer failures.mu.Unlock()
	for _, f := range failures.all {
		if strings.Contains(f.Error(), fmt.Sprintf("pid %d", spare)) || f.Mesh == procs.Name() {
			t.Fatalf("a failure heard of an idle spare's end: %v", f)
		}
	}
}
