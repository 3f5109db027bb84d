package actorrt

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/wire"

	"github.com/cockroachdb/datadriven"
)

// TestFailureRouter runs the scripts in testdata/supervision: events for
// one process's failureRouter and the effects each gives. Owners are
// actor names ("-" for the process itself). Commands:
//
//	router self=c client                    a new router (client: the root)
//	owned id=c.m1 name=w dims=(gpus=2) procs=(c-1,c-2) owner=sup
//	      [restart=(max=3,window=1m,backoff=100ms,maxbackoff=1s,scope=gpus|mesh|member)]
//	      [of-procs]                        a proc mesh: its members are its procs
//	      [go-on]                           it goes on without members that cannot restart (GoOnWithout)
//	replaced old=c-1 new=c-9                a proc started in the place of one that ended
//	disowned id=c.m1                        a spawn that failed
//	failed id=c.m1 rank=0 reason=boom [owner-proc=p] [at=1s]  a member failed (reported here)
//	restart-done id=c.m1 ranks=(0,1) [failed=(1)] [final=(0)] [at=2s]  a restart ended; failed: those whose new
//	                                        instance failed; final: those that failed for good (their host is gone)
//	moved id=c.m1 ranks=(0) proc=c-9        members now on a new proc
//	by-hand id=c.m1 ranks=(0)               ActorMesh.Restart's check
//	proc-ended proc=c-1 reason=crashed [stopped]
//	stopped id=c.m1                         the mesh was stopped on request
//	owner-ended owner=sup                   the owner actor failed or stopped
//
// go test -run TestFailureRouter -rewrite ./actorrt rewrites the expected
// effects; read the diff before keeping it.
func TestFailureRouter(t *testing.T) {
	datadriven.Walk(t, "testdata/supervision", func(t *testing.T, path string) {
		var r *failureRouter
		meshes := map[string]ownedMesh{}     // what the script spawned, to make failures
		owners := map[string]*actor{"": nil} // by name ("" for the process itself)
		ownerNamed := func(name string) *actor {
			if _, ok := owners[name]; !ok {
				owners[name] = &actor{id: name}
			}
			return owners[name]
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "router" && r == nil {
				d.Fatalf(t, "start the script with: router self=ID [client]")
			}
			var effects []routerEffect
			switch d.Cmd {
			case "router":
				var self string
				d.ScanArgs(t, "self", &self)
				r = newFailureRouter(self, d.HasArg("client"))
				return ""
			case "owned":
				var id, name, owner string
				var procs []string
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "name", &name)
				d.ScanArgs(t, "procs", &procs)
				d.ScanArgs(t, "owner", &owner)
				if owner == "-" {
					owner = ""
				}
				dims := scanDims(t, d)
				base, err := NewExtent(dims)
				if err != nil || base.NumRanks() != len(procs) {
					d.Fatalf(t, "dims %v for %d procs: %v", dims, len(procs), err)
				}
				meshes[id] = ownedMesh{name: name, base: base, procs: procs}
				var plan *restartPlanner
				if d.HasArg("restart") {
					if plan, err = newRestartPlanner(scanPolicy(t, d), base); err != nil {
						return err.Error() + "\n"
					}
				}
				effects = r.step(evOwned{id: id, name: name, base: base, procs: procs, ofProcs: d.HasArg("of-procs"), owner: ownerNamed(owner), plan: plan, goOn: d.HasArg("go-on")})
			case "disowned":
				var id string
				d.ScanArgs(t, "id", &id)
				effects = r.step(evDisowned{id})
			case "failed":
				var id, reason, ownerProc string
				var rank int
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "rank", &rank)
				d.ScanArgs(t, "reason", &reason)
				d.MaybeScanArgs(t, "owner-proc", &ownerProc)
				m, ok := meshes[id]
				if !ok {
					m = ownedMesh{name: "other", base: Extent{}, procs: []string{"p?"}}
				}
				effects = r.step(evMemberFailed{f: failureOf(id, m, rank, reason), ownerProc: ownerProc, at: scanAt(t, d)})
			case "restart-done":
				var id string
				var ranks, failed []string
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "ranks", &ranks)
				d.MaybeScanArgs(t, "failed", &failed)
				ev := evRestartDone{id: id, ranks: atois(t, d, ranks), at: scanAt(t, d)}
				for _, b := range atois(t, d, failed) {
					ev.failed = append(ev.failed, failureOf(id, meshes[id], b, "its restart failed"))
				}
				var final []string
				d.MaybeScanArgs(t, "final", &final)
				for _, b := range atois(t, d, final) {
					ev.final = append(ev.final, failureOf(id, meshes[id], b, "its restart failed: its host is gone"))
				}
				effects = r.step(ev)
			case "moved":
				var id, proc string
				var ranks []string
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "ranks", &ranks)
				d.ScanArgs(t, "proc", &proc)
				effects = r.step(evMoved{id: id, ranks: atois(t, d, ranks), proc: proc})
			case "replaced":
				var old, new string
				d.ScanArgs(t, "old", &old)
				d.ScanArgs(t, "new", &new)
				effects = r.step(evReplaced{old: old, new: new})
			case "by-hand":
				var id string
				var ranks []string
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "ranks", &ranks)
				picked, err := r.restartable(id, atois(t, d, ranks))
				if err != nil {
					return err.Error() + "\n"
				}
				return fmt.Sprintf("restart %v\n", picked)
			case "proc-ended":
				var n wire.GoneNotice
				d.ScanArgs(t, "proc", &n.Proc)
				d.ScanArgs(t, "reason", &n.Reason)
				n.Stopped = d.HasArg("stopped")
				effects = r.step(evProcEnded{n: n, at: scanAt(t, d)})
			case "stopped":
				var id string
				d.ScanArgs(t, "id", &id)
				effects = r.step(evMeshStopped{id})
			case "owner-ended":
				var owner string
				d.ScanArgs(t, "owner", &owner)
				effects = r.step(evOwnerEnded{ownerNamed(owner)})
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			var p routerPrinter
			for _, e := range effects {
				e.applyTo(&p)
			}
			return p.String()
		})
	})
}

// routerPrinter writes a failureRouter's effects, one a line.
type routerPrinter struct{ strings.Builder }

func (p *routerPrinter) supervise(e effSupervise) {
	fmt.Fprintf(p, "supervise %s: %s\n", e.owner.id, e.f)
}
func (p *routerPrinter) forward(e effForward) { fmt.Fprintf(p, "forward to %s: %s\n", e.proc, e.f) }
func (p *routerPrinter) escalate(e effEscalate) {
	fmt.Fprintf(p, "escalate to the client: %s\n", e.f)
}
func (p *routerPrinter) unhandled(e effUnhandled) { fmt.Fprintf(p, "fault hook: %s\n", e.f) }
func (p *routerPrinter) stopMesh(e effStopMesh) {
	fmt.Fprintf(p, "stop %s on %s\n", e.id, strings.Join(e.procs, ","))
}
func (p *routerPrinter) restartLater(e effRestart) {
	fmt.Fprintf(p, "restart %s ranks %v after %v: %s\n", e.id, e.ranks, e.after, e.f)
}
func (p *routerPrinter) giveUp(e effGiveUp) {
	what := "give up on"
	if e.missing {
		what = "go on without"
	}
	fmt.Fprintf(p, "%s %s ranks %v: %s\n", what, e.id, e.ranks, e.reason)
}

func failureOf(id string, m ownedMesh, rank int, reason string) *MeshFailure {
	pt := m.base.point(rank)
	return &MeshFailure{Mesh: m.name, MeshID: id, ActorID: m.name + "[" + strconv.Itoa(rank) + "]",
		Proc: m.procs[rank], Reason: reason, Dims: m.base.dims, Coords: pt.coords, Base: rank}
}

// scanAt reads at=1s, an offset from the script's epoch (0 without it).
func scanAt(t *testing.T, d *datadriven.TestData) time.Time {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s string
	if !d.MaybeScanArgs(t, "at", &s) {
		return epoch
	}
	off, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "at=%s: %v", s, err)
	}
	return epoch.Add(off)
}

func atois(t *testing.T, d *datadriven.TestData, ss []string) []int {
	out := make([]int, len(ss))
	for i, s := range ss {
		n, err := strconv.Atoi(s)
		if err != nil {
			d.Fatalf(t, "rank %q: %v", s, err)
		}
		out[i] = n
	}
	return out
}

// scanPolicy reads restart=(max=3,window=1m,backoff=100ms,maxbackoff=1s,scope=...):
// scope is member, mesh, or dimension names joined by '+'.
func scanPolicy(t *testing.T, d *datadriven.TestData) RestartPolicy {
	var parts []string
	d.ScanArgs(t, "restart", &parts)
	var p RestartPolicy
	for _, kv := range parts {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "max":
			p.MaxRestarts, err = strconv.Atoi(v)
		case "window":
			p.Window, err = time.ParseDuration(v)
		case "backoff":
			p.Backoff, err = time.ParseDuration(v)
		case "maxbackoff":
			p.MaxBackoff, err = time.ParseDuration(v)
		case "scope":
			switch v {
			case "member":
				p.Scope = RestartMember
			case "mesh":
				p.Scope = RestartMesh
			default:
				p.Scope = RestartAlong(strings.Split(v, "+")...)
			}
		default:
			d.Fatalf(t, "restart: unknown %q", k)
		}
		if err != nil {
			d.Fatalf(t, "restart: %s: %v", kv, err)
		}
	}
	return p
}

// scanDims reads dims=(name=size,...).
func scanDims(t *testing.T, d *datadriven.TestData) Dims {
	var parts []string
	d.ScanArgs(t, "dims", &parts)
	var dims Dims
	for _, p := range parts {
		name, size, ok := strings.Cut(p, "=")
		n, err := strconv.Atoi(size)
		if !ok || err != nil {
			d.Fatalf(t, "dims: %q is not name=size", p)
		}
		dims = append(dims, Dim{name, n})
	}
	return dims
}
