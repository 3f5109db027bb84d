package collective_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
)

// TestSmall: every collective on 2, 3 and 4 procs, on each backend, for
// lengths around the direct path's bound (the test's slots are 4096
// bytes: 512 float64 go direct, 513 round the ring), lengths not
// divisible by the group, one element and none; the sizes alternate
// between the paths on the same communicator.
func TestSmall(t *testing.T) {
	sizes := []int{1, 3000, 0, 7, 513, 2, 512, 100, 1001, 5, 511}
	for _, backend := range []string{"shm", "tcp"} {
		for _, np := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s-%dprocs", backend, np), func(t *testing.T) {
				ctx := testCtx(t)
				c, w, procs := setup(t, actorrt.Dims{{"gpus", np}}, backend)
				ext := procs.Extent()
				for _, n := range sizes {
					for _, op := range []collective.Op{collective.Sum, collective.Max} {
						got, err := actorrt.Method1((*Worker).AllReduce).Call(w, Job{Comm: *c, Dim: "gpus", Op: int(op), N: n, Victim: -1}).Get(ctx)
						if err != nil {
							t.Fatalf("all-reduce %v n=%d: %v", op, n, err)
						}
						for p, vals := range got.Items() {
							if len(vals) != n {
								t.Fatalf("all-reduce %v n=%d: %v has %d elements", op, n, p, len(vals))
							}
							for i, v := range vals {
								if want := want(op, group(ext, p, "gpus"), i); v != want {
									t.Fatalf("all-reduce %v n=%d: %v element %d = %v, want %v", op, n, p, i, v, want)
								}
							}
						}
					}
					rs, err := actorrt.Method1((*Worker).ReduceScatter).Call(w, Job{Comm: *c, Dim: "gpus", Op: int(collective.Sum), N: n}).Get(ctx)
					if err != nil {
						t.Fatalf("reduce-scatter n=%d: %v", n, err)
					}
					for p, vals := range rs.Items() {
						idx, _ := p.Get("gpus")
						lo, hi := idx*n/np, (idx+1)*n/np
						if len(vals) != hi-lo {
							t.Fatalf("reduce-scatter n=%d: %v has %d elements, want %d", n, p, len(vals), hi-lo)
						}
						for j, v := range vals {
							if want := want(collective.Sum, group(ext, p, "gpus"), lo+j); v != want {
								t.Fatalf("reduce-scatter n=%d: %v element %d = %v, want %v", n, p, lo+j, v, want)
							}
						}
					}
					ag, err := actorrt.Method1((*Worker).AllGather).Call(w, Job{Comm: *c, Dim: "gpus", N: n}).Get(ctx)
					if err != nil {
						t.Fatalf("all-gather n=%d: %v", n, err)
					}
					for p, vals := range ag.Items() {
						var expect []float64
						for _, r := range group(ext, p, "gpus") {
							for i := range n {
								expect = append(expect, value(r, i))
							}
						}
						if !slices.Equal(vals, expect) {
							t.Fatalf("all-gather n=%d: %v got %v, want %v", n, p, vals, expect)
						}
					}
					root := n % np
					bc, err := actorrt.Method1((*Worker).Broadcast).Call(w, Job{Comm: *c, Dim: "gpus", Root: root, N: n}).Get(ctx)
					if err != nil {
						t.Fatalf("broadcast n=%d: %v", n, err)
					}
					for p, vals := range bc.Items() {
						from := group(ext, p, "gpus")[root]
						for i, v := range vals {
							if v != value(from, i) {
								t.Fatalf("broadcast n=%d from %d: %v element %d = %v, want %v", n, root, p, i, v, value(from, i))
							}
						}
					}
				}
			})
		}
	}
}

// TestMismatch: members that pass different lengths (both small, one
// small and one large, both large) all fail, each with an error naming
// both lengths, without a hang; the communicator then still works.
func TestMismatch(t *testing.T) {
	for _, backend := range []string{"shm", "tcp"} {
		t.Run(backend, func(t *testing.T) {
			ctx := testCtx(t)
			c, w, procs := setup(t, actorrt.Dims{{"gpus", 3}}, backend)
			ar := actorrt.Method1((*Worker).AllReduce)
			ag := actorrt.Method1((*Worker).AllGather)
			for _, nby := range [][]int{{10, 10, 11}, {10, 5000, 10}, {3000, 3000, 3001}, {0, 1, 0}} {
				for kind, m := range map[string]actorrt.Endpoint1[Worker, Job, []float64]{"all-reduce": ar, "all-gather": ag} {
					job := Job{Comm: *c, Dim: "gpus", NBy: nby, Victim: -1}
					var fs []*actorrt.Future[actorrt.ValueMesh[[]float64]]
					for r := range 3 {
						fs = append(fs, m.Call(w.Slice("gpus", r, r+1), job))
					}
					for r, f := range fs {
						_, err := f.Get(ctx)
						if err == nil {
							t.Fatalf("%s of %v: member %d succeeded", kind, nby, r)
						}
						e := err.Error()
						other := nby[0]
						if other == nby[r] {
							other = slices.Max(nby)
						}
						for _, n := range []int{nby[r], other} {
							if !strings.Contains(e, fmt.Sprintf("of %d bytes", 8*n)) || !strings.Contains(e, "calls differ") {
								t.Fatalf("%s of %v: member %d: %v, want both lengths (%d and %d bytes) named", kind, nby, r, err, 8*nby[r], 8*other)
							}
						}
					}
				}
			}
			// The group is still usable.
			got, err := ar.Call(w, Job{Comm: *c, Dim: "gpus", Op: int(collective.Sum), N: 10, Victim: -1}).Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for p, vals := range got.Items() {
				for i, v := range vals {
					if want := want(collective.Sum, group(procs.Extent(), p, "gpus"), i); v != want {
						t.Fatalf("after the mismatches: %v element %d = %v, want %v", p, i, v, want)
					}
				}
			}
		})
	}
}

// TestLinkBackends: members that reach each other through different
// backends (forced so, one proc tcp, the other shm) would cut the ring's
// messages differently: both fail saying so, rather than mix them up.
func TestLinkBackends(t *testing.T) {
	ctx := testCtx(t)
	c, w, _ := setupEnv(t, actorrt.Dims{{"gpus", 2}}, func(p actorrt.Point) []string {
		if i, _ := p.Get("gpus"); i == 0 {
			return []string{"MONARCH_RDMA_BACKEND=tcp"}
		}
		return []string{"MONARCH_RDMA_BACKEND=shm"}
	})
	ar := actorrt.Method1((*Worker).AllReduce)
	var fs []*actorrt.Future[actorrt.ValueMesh[[]float64]]
	for r := range 2 {
		fs = append(fs, ar.Call(w.Slice("gpus", r, r+1), Job{Comm: *c, Dim: "gpus", Op: int(collective.Sum), N: 2000, Victim: -1}))
	}
	for r, f := range fs {
		_, err := f.Get(ctx)
		if err == nil || !strings.Contains(err.Error(), "different backends") {
			t.Fatalf("member %d: %v, want the backends named as differing", r, err)
		}
	}
}
