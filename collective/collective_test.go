package collective_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The test binary is also the procs' program: SpawnProcs runs it again in
// worker mode.
// clientCtx is the ctx Run gives the tests: it carries the client's
// runtime, which ThisHost resolves from it.
var clientCtx context.Context

func TestMain(m *testing.M) {
	env := testenv.Setup()
	if err := actorrt.Register[Worker](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := 0
	status := actorrt.Run(func(ctx context.Context) error {
		clientCtx = ctx
		code = m.Run()
		return nil
		// TestMemberDies kills a proc on purpose: its failures are the
		// test's to look at, not a reason to end the run.
	}, actorrt.WithSpawnTimeout(60*time.Second), actorrt.WithFaultHook(func(*actorrt.MeshFailure) error { return nil }))
	if status != 0 {
		code = status
	}
	os.Exit(env.Finish(code))
}

// Worker runs collectives on its proc's member.
type Worker struct{}

// value is what member rank holds at element i before a collective.
func value(rank, i int) float64 { return float64((rank*7919+i*31)%1000) + 0.25 }

func input(ctx *actorrt.Context, n int) []float64 {
	r := ctx.ActorInstance().Rank().Rank()
	data := make([]float64, n)
	for i := range data {
		data[i] = value(r, i)
	}
	return data
}

// Job is what a worker is asked to run.
type Job struct {
	Comm   collective.Comm `msgpack:"comm"`
	Dim    string          `msgpack:"dim"`
	Op     int             `msgpack:"op"`
	N      int             `msgpack:"n"`
	Root   int             `msgpack:"root"`
	Victim int             `msgpack:"victim"` // a rank that exits instead, as a proc that dies mid-collective; -1 none
	// VictimAtConnect: the victim exits inside the collective, after the
	// round every member takes part in, as it would connect to its
	// successor (the guard's tests).
	VictimAtConnect bool `msgpack:"victim_at_connect"`
	// StallRank stalls for StallAtConnect (if set) as it would connect
	// to its successor, alive and answering; WaitBound, if set, is the
	// collective's on every member.
	StallRank      int           `msgpack:"stall_rank"`
	StallAtConnect time.Duration `msgpack:"stall_at_connect"`
	WaitBound      time.Duration `msgpack:"wait_bound"`
	// NBy, if set, is N by rank: members that pass different lengths.
	NBy []int `msgpack:"nby,omitempty"`
}

// n is the length member ctx passes.
func (j Job) n(ctx *actorrt.Context) int {
	if j.NBy != nil {
		return j.NBy[ctx.ActorInstance().Rank().Rank()]
	}
	return j.N
}

// AllReduce all-reduces its input along the job's dimension.
func (w *Worker) AllReduce(ctx *actorrt.Context, j Job) ([]float64, error) {
	if j.WaitBound > 0 {
		collective.WaitBound = j.WaitBound
	}
	switch rank := ctx.ActorInstance().Rank().Rank(); {
	case rank == j.Victim && j.VictimAtConnect:
		collective.SetConnectHook(func() { os.Exit(3) })
	case rank == j.Victim:
		os.Exit(3)
	case rank == j.StallRank && j.StallAtConnect > 0:
		collective.SetConnectHook(func() { time.Sleep(j.StallAtConnect) })
	}
	data := input(ctx, j.n(ctx))
	err := collective.AllReduce(ctx, &j.Comm, j.Dim, data, collective.Op(j.Op))
	return data, err
}

// AllReduce32 is AllReduce in float32.
func (w *Worker) AllReduce32(ctx *actorrt.Context, j Job) ([]float64, error) {
	in := input(ctx, j.N)
	data := make([]float32, j.N)
	for i, v := range in {
		data[i] = float32(v)
	}
	if err := collective.AllReduce(ctx, &j.Comm, j.Dim, data, collective.Op(j.Op)); err != nil {
		return nil, err
	}
	out := make([]float64, j.N)
	for i, v := range data {
		out[i] = float64(v)
	}
	return out, nil
}

func (w *Worker) ReduceScatter(ctx *actorrt.Context, j Job) ([]float64, error) {
	return collective.ReduceScatter(ctx, &j.Comm, j.Dim, input(ctx, j.n(ctx)), collective.Op(j.Op))
}

func (w *Worker) AllGather(ctx *actorrt.Context, j Job) ([]float64, error) {
	return collective.AllGather(ctx, &j.Comm, j.Dim, input(ctx, j.n(ctx)))
}

func (w *Worker) Broadcast(ctx *actorrt.Context, j Job) ([]float64, error) {
	data := input(ctx, j.n(ctx))
	err := collective.Broadcast(ctx, &j.Comm, j.Dim, j.Root, data)
	return data, err
}

// setup spawns procs of dims with a worker each, and a communicator with
// small slots (so that messages go in pieces), its procs forced to
// backend.
func setup(t *testing.T, dims actorrt.Dims, backend string) (*collective.Comm, *actorrt.ActorMesh[Worker], *actorrt.ProcMesh) {
	t.Helper()
	return setupEnv(t, dims, func(actorrt.Point) []string { return []string{"MONARCH_RDMA_BACKEND=" + backend} })
}

// setupEnv is setup with env as each proc's environment.
func setupEnv(t *testing.T, dims actorrt.Dims, env func(actorrt.Point) []string) (*collective.Comm, *actorrt.ActorMesh[Worker], *actorrt.ProcMesh) {
	t.Helper()
	return setupSlot(t, dims, env, 4096)
}

// setupSlot is setupEnv with slots of slot bytes.
func setupSlot(t *testing.T, dims actorrt.Dims, env func(actorrt.Point) []string, slot int) (*collective.Comm, *actorrt.ActorMesh[Worker], *actorrt.ProcMesh) {
	t.Helper()
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, dims, actorrt.WithProcEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { procs.Stop(context.Background()) })
	c, err := collective.NewWithSlot(ctx, procs, slot)
	if err != nil {
		t.Fatal(err)
	}
	w, err := actorrt.Spawn[Worker](ctx, procs, "workers")
	if err != nil {
		t.Fatal(err)
	}
	return c, w, procs
}

// group is the ranks of ext whose coordinates equal p's but in dim.
func group(ext actorrt.Extent, p actorrt.Point, dim string) []int {
	var out []int
	for _, q := range ext.Points() {
		same := true
		for _, name := range ext.Names() {
			a, _ := p.Get(name)
			b, _ := q.Get(name)
			if name != dim && a != b {
				same = false
			}
		}
		if same {
			out = append(out, q.Rank())
		}
	}
	return out
}

// want is op over the members of ranks at element i.
func want(op collective.Op, ranks []int, i int) float64 {
	acc := value(ranks[0], i)
	for _, r := range ranks[1:] {
		v := value(r, i)
		switch op {
		case collective.Sum, collective.Mean:
			acc += v
		case collective.Max:
			acc = max(acc, v)
		case collective.Min:
			acc = min(acc, v)
		}
	}
	if op == collective.Mean {
		acc /= float64(len(ranks))
	}
	return acc
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(clientCtx, 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestAllReduce: every op, over every dimension of a 2-D mesh of odd
// sizes, for lengths shorter than the group, odd, and longer than a slot,
// on each backend: exact against a local computation.
func TestAllReduce(t *testing.T) {
	for _, backend := range []string{"shm", "tcp"} {
		t.Run(backend, func(t *testing.T) {
			ctx := testCtx(t)
			c, w, procs := setup(t, actorrt.Dims{{"hosts", 2}, {"gpus", 3}}, backend)
			ext := procs.Extent()
			ar := actorrt.Method1((*Worker).AllReduce)
			for _, dim := range []string{"hosts", "gpus"} {
				for _, op := range []collective.Op{collective.Sum, collective.Mean, collective.Max, collective.Min} {
					for _, n := range []int{2, 1001, 3000} { // 3000 float64: 24,000 bytes, 6 slots
						got, err := ar.Call(w, Job{Comm: *c, Dim: dim, Op: int(op), N: n, Victim: -1}).Get(ctx)
						if err != nil {
							t.Fatalf("%s %v n=%d: %v", dim, op, n, err)
						}
						for p, vals := range got.Items() {
							ranks := group(ext, p, dim)
							for i, v := range vals {
								if want := want(op, ranks, i); v != want {
									t.Fatalf("%s %v n=%d: %v element %d = %v, want %v (group %v)", dim, op, n, p, i, v, want, ranks)
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestAllReduceFloat32: the same in float32 (sums of small values, exact).
func TestAllReduceFloat32(t *testing.T) {
	ctx := testCtx(t)
	c, w, procs := setup(t, actorrt.Dims{{"gpus", 5}}, "shm")
	got, err := actorrt.Method1((*Worker).AllReduce32).Call(w, Job{Comm: *c, Dim: "gpus", Op: int(collective.Sum), N: 777}).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p, vals := range got.Items() {
		for i, v := range vals {
			if want := float64(float32(want(collective.Sum, group(procs.Extent(), p, "gpus"), i))); v != want {
				t.Fatalf("%v element %d = %v, want %v", p, i, v, want)
			}
		}
	}
}

// TestOthers: reduce-scatter, all-gather and broadcast over each
// dimension, on each backend.
func TestOthers(t *testing.T) {
	for _, backend := range []string{"shm", "tcp"} {
		t.Run(backend, func(t *testing.T) { testOthers(t, backend) })
	}
}

func testOthers(t *testing.T, backend string) {
	ctx := testCtx(t)
	c, w, procs := setup(t, actorrt.Dims{{"hosts", 3}, {"gpus", 2}}, backend)
	ext := procs.Extent()
	for _, dim := range []string{"hosts", "gpus"} {
		size, _ := ext.Size(dim)
		const n = 1001
		rs, err := actorrt.Method1((*Worker).ReduceScatter).Call(w, Job{Comm: *c, Dim: dim, Op: int(collective.Max), N: n}).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for p, vals := range rs.Items() {
			idx, _ := p.Get(dim)
			lo, hi := idx*n/size, (idx+1)*n/size
			if len(vals) != hi-lo {
				t.Fatalf("reduce-scatter %s: %v has %d elements, want %d", dim, p, len(vals), hi-lo)
			}
			for j, v := range vals {
				if want := want(collective.Max, group(ext, p, dim), lo+j); v != want {
					t.Fatalf("reduce-scatter %s: %v element %d = %v, want %v", dim, p, lo+j, v, want)
				}
			}
		}
		ag, err := actorrt.Method1((*Worker).AllGather).Call(w, Job{Comm: *c, Dim: dim, N: 1000}).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for p, vals := range ag.Items() {
			var expect []float64
			for _, r := range group(ext, p, dim) {
				for i := range 1000 {
					expect = append(expect, value(r, i))
				}
			}
			if !slices.Equal(vals, expect) {
				t.Fatalf("all-gather %s: %v got %v, want %v", dim, p, vals, expect)
			}
		}
		for root := range size {
			bc, err := actorrt.Method1((*Worker).Broadcast).Call(w, Job{Comm: *c, Dim: dim, Root: root, N: 5000}).Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for p, vals := range bc.Items() {
				from := group(ext, p, dim)[root]
				for i, v := range vals {
					if v != value(from, i) {
						t.Fatalf("broadcast %s from %d: %v element %d = %v, want %v", dim, root, p, i, v, value(from, i))
					}
				}
			}
		}
	}
}

// The guard of a member's links on connections (tcp): while data should
// move, it checks both neighbours every 100 ms and ends the collective
// when one is gone or nothing moved for WaitBound; a member waiting for
// its predecessor to connect has no other way to learn either.

// TestGuardNoticesADeadPeer: of two members, one dies inside the
// collective, as it would connect; the other, its own connect held back,
// waits for the dead one's connection, and fails at once on the guard's
// check, naming it.
func TestGuardNoticesADeadPeer(t *testing.T) {
	ctx := testCtx(t)
	c, w, _ := setup(t, actorrt.Dims{{"gpus", 2}}, "tcp")
	job := Job{Comm: *c, Dim: "gpus", N: 100000, Victim: 1, VictimAtConnect: true, StallRank: 0, StallAtConnect: 2 * time.Second}
	ar := actorrt.Method1((*Worker).AllReduce)
	t0 := time.Now()
	survivor := ar.Call(w.Slice("gpus", 0, 1), job)
	ar.Call(w.Slice("gpus", 1, 2), job) // it exits
	_, err := survivor.Get(ctx)
	t.Logf("the survivor failed after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "checking on member {gpus: 1} (rank 1)") {
		t.Fatalf("the survivor: %v; want it to fail on the guard's check of the member that died", err)
	}
}

// TestMemberStalls: a member that stalls inside a collective, alive and
// answering the guard's checks, fails its successor (which waits for its
// connection) once nothing moved for WaitBound, naming it.
func TestMemberStalls(t *testing.T) {
	ctx := testCtx(t)
	c, w, _ := setup(t, actorrt.Dims{{"gpus", 3}}, "tcp")
	job := Job{Comm: *c, Dim: "gpus", N: 100000, Victim: -1, StallRank: 1, StallAtConnect: 10 * time.Second, WaitBound: 2 * time.Second}
	ar := actorrt.Method1((*Worker).AllReduce)
	t0 := time.Now()
	futures := []*actorrt.Future[actorrt.ValueMesh[[]float64]]{
		ar.Call(w.Slice("gpus", 0, 1), job), ar.Call(w.Slice("gpus", 1, 2), job), ar.Call(w.Slice("gpus", 2, 3), job)}
	_, err := futures[2].Get(ctx)
	t.Logf("the successor of a stalled member failed after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "nothing from member {gpus: 1} (rank 1)") || !strings.Contains(err.Error(), "for 2s") {
		t.Fatalf("the successor of the stalled member: %v; want it to fail, naming it, after WaitBound", err)
	}
	for _, f := range futures[:2] {
		f.Get(ctx) // they fail too, bounded by WaitBound and the stall
	}
}

// TestBadCalls: a dimension the mesh does not have is refused at once.
func TestBadCalls(t *testing.T) {
	ctx := testCtx(t)
	c, w, _ := setup(t, actorrt.Dims{{"gpus", 2}}, "shm")
	_, err := actorrt.Method1((*Worker).AllReduce).Call(w, Job{Comm: *c, Dim: "nodes", N: 10, Victim: -1}).Get(ctx)
	if err == nil || !strings.Contains(err.Error(), `no such dimension: "nodes"`) {
		t.Fatalf("all-reduce over a missing dimension: %v", err)
	}
}

// TestMemberDies: a proc that dies mid-collective fails the others with
// an error naming it, within seconds, on each backend.
func TestMemberDies(t *testing.T) {
	for _, backend := range []string{"shm", "tcp"} {
		t.Run(backend, func(t *testing.T) {
			ctx := testCtx(t)
			c, w, _ := setup(t, actorrt.Dims{{"gpus", 3}}, backend)
			t0 := time.Now()
			// Each its own call: a call to the three would fail as a whole
			// when the victim's proc ends.
			job := Job{Comm: *c, Dim: "gpus", N: 100000, Victim: 1}
			ar := actorrt.Method1((*Worker).AllReduce)
			first, last := ar.Call(w.Slice("gpus", 0, 1), job), ar.Call(w.Slice("gpus", 2, 3), job)
			ar.Call(w.Slice("gpus", 1, 2), job) // it exits
			var errs []string
			for i, f := range []*actorrt.Future[actorrt.ValueMesh[[]float64]]{first, last} {
				_, err := f.Get(ctx)
				if err == nil {
					t.Fatalf("survivor %d: the all-reduce succeeded without member 1", i)
				}
				errs = append(errs, err.Error())
			}
			t.Logf("a member died: the others failed within %v", time.Since(t0).Round(time.Millisecond))
			named := 0
			for _, e := range errs {
				if strings.Contains(e, "member {gpus: 1} (rank 1)") {
					named++
				}
			}
			if named < 2 {
				t.Errorf("errors %q: want both survivors to name the member that died", errs)
			}
		})
	}
}

// TestStreamPieces: on links through tcp the sender writes pieces of
// min(1 MiB, slot) and the receiver reads pieces of min(256 KiB, slot)
// (link.go, streamPiece and readPiece); with slots of 512 KiB, chunks of
// the ring that are a whole number of both, one element more, odd and
// shorter than a read all come out exact, for every collective.
func TestStreamPieces(t *testing.T) {
	ctx, cancel := context.WithTimeout(clientCtx, 5*time.Minute)
	defer cancel()
	c, w, procs := setupSlot(t, actorrt.Dims{{"gpus", 3}}, func(actorrt.Point) []string {
		return []string{"MONARCH_RDMA_BACKEND=tcp"}
	}, 512<<10)
	ext := procs.Extent()
	const piece = 512 << 10 / 8 // float64s in a written piece
	for _, n := range []int{3 * piece, 3*piece + 1, 100_001, 3*piece/2 + 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ar, err := actorrt.Method1((*Worker).AllReduce).Call(w, Job{Comm: *c, Dim: "gpus", Op: int(collective.Sum), N: n, Victim: -1}).Get(ctx)
			if err != nil {
				t.Fatalf("all-reduce: %v", err)
			}
			for p, vals := range ar.Items() {
				checkFrom(t, fmt.Sprintf("all-reduce at %v", p), vals, n, 0, func(i int) float64 { return want(collective.Sum, group(ext, p, "gpus"), i) })
			}
			rs, err := actorrt.Method1((*Worker).ReduceScatter).Call(w, Job{Comm: *c, Dim: "gpus", Op: int(collective.Sum), N: n}).Get(ctx)
			if err != nil {
				t.Fatalf("reduce-scatter: %v", err)
			}
			for p, vals := range rs.Items() {
				idx, _ := p.Get("gpus")
				lo, hi := idx*n/3, (idx+1)*n/3
				checkFrom(t, fmt.Sprintf("reduce-scatter at %v", p), vals, hi-lo, lo, func(i int) float64 { return want(collective.Sum, group(ext, p, "gpus"), i) })
			}
			part := n / 3
			ag, err := actorrt.Method1((*Worker).AllGather).Call(w, Job{Comm: *c, Dim: "gpus", N: part}).Get(ctx)
			if err != nil {
				t.Fatalf("all-gather: %v", err)
			}
			for p, vals := range ag.Items() {
				checkFrom(t, fmt.Sprintf("all-gather at %v", p), vals, 3*part, 0, func(i int) float64 { return value(group(ext, p, "gpus")[i/part], i%part) })
			}
			root := n % 3
			bc, err := actorrt.Method1((*Worker).Broadcast).Call(w, Job{Comm: *c, Dim: "gpus", Root: root, N: n}).Get(ctx)
			if err != nil {
				t.Fatalf("broadcast: %v", err)
			}
			for p, vals := range bc.Items() {
				checkFrom(t, fmt.Sprintf("broadcast from %d at %v", root, p), vals, n, 0, func(i int) float64 { return value(group(ext, p, "gpus")[root], i) })
			}
		})
	}
}

// checkFrom fails t unless vals holds n values, the j-th of which is
// want(from+j).
func checkFrom(t *testing.T, what string, vals []float64, n, from int, want func(i int) float64) {
	t.Helper()
	if len(vals) != n {
		t.Fatalf("%s: %d elements, want %d", what, len(vals), n)
	}
	for j, v := range vals {
		if w := want(from + j); v != w {
			t.Fatalf("%s: element %d = %v, want %v", what, from+j, v, w)
		}
	}
}
