package jobview

import (
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// TestSelectProcs: a selection picks by mesh, rank and host together; a
// mesh, rank or host the job has not is an error naming what it has.
func TestSelectProcs(t *testing.T) {
	l := Live{ProcMeshes: []ProcMesh{
		{Name: "workers", Procs: []Proc{{ID: "p0", Host: "n0"}, {ID: "p1", Host: "n1"}}},
		{Name: "", Procs: []Proc{{ID: "p2", Host: "n1"}}},
	}, HostOf: func(p string) string {
		if p == "p0" {
			return "n0b" // as it announced itself
		}
		return ""
	}}
	all := procsOf(l)
	ids := func(ps []proc) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.id)
		}
		return strings.Join(out, ",")
	}
	for _, tt := range []struct {
		sel        jobctl.Selection
		want, fail string
	}{
		{jobctl.Selection{}, "p0,p1,p2", ""},
		{jobctl.Selection{Meshes: []string{"workers"}, Ranks: []int{1}}, "p1", ""},
		{jobctl.Selection{Hosts: []string{"n1"}}, "p1,p2", ""},
		{jobctl.Selection{Hosts: []string{"n0b"}}, "p0", ""},
		{jobctl.Selection{Ranks: []int{0}}, "p0,p2", ""},
		{jobctl.Selection{Meshes: []string{"x"}}, "", `no proc mesh "x"; the job's proc meshes: workers, `},
		{jobctl.Selection{Hosts: []string{"n0"}}, "", `no proc of the job on host "n0"; the job's hosts: n0b, n1`},
		{jobctl.Selection{Ranks: []int{2}}, "", "no rank 2: mesh workers has ranks 0-1, the unnamed mesh has ranks 0-0"},
	} {
		got, err := selectProcs(all, tt.sel)
		switch {
		case tt.fail != "" && (err == nil || err.Error() != tt.fail):
			t.Errorf("%+v: error %v, want %q", tt.sel, err, tt.fail)
		case tt.fail == "" && (err != nil || ids(got) != tt.want):
			t.Errorf("%+v: %s, %v; want %s", tt.sel, ids(got), err, tt.want)
		}
	}
	if _, err := selectProcs(nil, jobctl.Selection{Ranks: []int{0}}); err == nil || err.Error() != "no rank 0: the job has no procs" {
		t.Errorf("no procs: %v", err)
	}
}

// TestSelectExecHosts: hosts by name, each once, or all; a host the job
// has not is an error naming those it has.
func TestSelectExecHosts(t *testing.T) {
	all := []ExecHost{{"n0", "h0"}, {"n1", "h1"}}
	got, err := selectExecHosts(all, jobctl.ExecRequest{Hosts: []string{"n1", "n1"}})
	if err != nil || len(got) != 1 || got[0] != all[1] {
		t.Errorf("n1 twice: %v, %v", got, err)
	}
	if got, _ := selectExecHosts(all, jobctl.ExecRequest{All: true}); len(got) != 2 {
		t.Errorf("all: %v", got)
	}
	if _, err := selectExecHosts(all, jobctl.ExecRequest{Hosts: []string{"n9"}}); err == nil || err.Error() != `no host "n9" in the job; its hosts: n0, n1` {
		t.Errorf("n9: %v", err)
	}
}

// TestExecQueueBound: past maxExecQueue bytes held, output is dropped and
// counted by host and stream, told once in its place, and counted in the
// host's total.
func TestExecQueueBound(t *testing.T) {
	q := newExecQueue()
	big := make([]byte, maxExecQueue-10)
	q.push(jobctl.ExecEvent{Host: "n0", Stream: 1, Data: big})
	q.push(jobctl.ExecEvent{Host: "n0", Stream: 2, Data: make([]byte, 20)}) // past the bound
	q.push(jobctl.ExecEvent{Host: "n1", Stream: 1, Data: make([]byte, 5)})  // fits
	evs, closed := q.take()
	if closed || len(evs) != 3 || len(evs[0].Data) != len(big) || len(evs[1].Data) != 5 || evs[2].Dropped != 20 || evs[2].Host != "n0" || evs[2].Stream != 2 {
		t.Fatalf("take: %d events, closed %v: %+v", len(evs), closed, evs[min(2, len(evs)-1)])
	}
	q.push(jobctl.ExecEvent{Host: "n0", Stream: 1, Data: make([]byte, 7)}) // room again
	q.close()
	evs, closed = q.take()
	if !closed || len(evs) != 1 || len(evs[0].Data) != 7 {
		t.Errorf("after close: %d events, closed %v", len(evs), closed)
	}
	if q.droppedOf("n0") != 20 || q.droppedOf("n1") != 0 {
		t.Errorf("dropped n0 %d, n1 %d; want 20, 0", q.droppedOf("n0"), q.droppedOf("n1"))
	}
}
