package topview

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/monarch-go/monarch/internal/jobctl"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// snapshot is a job of 2 hosts, a proc mesh of 4 procs and an actor
// mesh on them whose member 1 failed, at t0+at with counts and figures
// grown by k.
func snapshot(at time.Duration, k uint64) *jobctl.JobState {
	s := &jobctl.JobState{Version: jobctl.StateVersion, Job: "j1", At: t0.Add(at), Seq: 7,
		Hosts: []jobctl.HostState{
			{Agent: "h0.a", Name: "h0", State: "up", LastHeartbeat: t0.Add(at - 1500*time.Millisecond)},
			{Agent: "h1.a", Name: "h1", State: "gone", Reason: "lost"},
		},
		ProcMeshes: []jobctl.ProcMeshState{{Name: "workers", Extent: jobctl.Extent{{Name: "hosts", Size: 2}, {Name: "gpus", Size: 2}}}},
		ActorMeshes: []jobctl.ActorMeshState{{ID: "m1", Name: "pingers", Type: "Pinger", Owner: "c",
			Extent: jobctl.Extent{{Name: "hosts", Size: 2}, {Name: "gpus", Size: 2}}, Sent: 100 * k, Handled: 90 * k}},
		Events:   []jobctl.Event{{At: t0, Kind: "failure", Mesh: "pingers", Rank: 1, Proc: "h0.c-2", Reason: "feedTestFailure: failed on purpose"}},
		LogLines: 1,
		Logs:     []jobctl.LogLine{{At: t0, Proc: "h0.c-1", Stream: "stderr", Text: "a \x1b[2Jline\twith controls"}},
	}
	pm, am := &s.ProcMeshes[0], &s.ActorMeshes[0]
	for r := range 4 {
		proc := fmt.Sprintf("h%d.c-%d", r/2, r+1)
		pm.Procs = append(pm.Procs, jobctl.ProcState{Proc: proc, Rank: r, Host: fmt.Sprintf("h%d", r/2), PID: 1000 + r, State: "running",
			CPUSeconds: float64(k) * float64(r), RSS: 50 << 20, FiguresAt: s.At})
		m := jobctl.MemberState{Rank: r, Proc: proc, State: "running"}
		if r == 0 {
			m.Sent, m.Handled = 100*k, 90*k
		}
		if r == 1 {
			m.State, m.Reason = "failed", "feedTestFailure: failed on purpose"
		}
		am.Members = append(am.Members, m)
	}
	return s
}

// row is the row of the table under title whose first cell is rank.
func row(t *testing.T, lines []string, title, rank string) []string {
	t.Helper()
	in := false
	for _, l := range lines {
		if !strings.HasPrefix(l, " ") {
			in = strings.HasPrefix(l, title)
			continue
		}
		if f := strings.Fields(l); in && len(f) > 0 && f[0] == rank {
			return f
		}
	}
	t.Fatalf("no row %s under %q:\n%s", rank, title, strings.Join(lines, "\n"))
	return nil
}

// TestRender: rates from two snapshots 2 s apart; the failed member
// with its reason; control characters of a log line are spaces; without
// an earlier snapshot the rates are "-".
func TestRender(t *testing.T) {
	prev, s := snapshot(0, 1), snapshot(2*time.Second, 3)
	lines := Lines(s, prev, 0, 0)
	out := strings.Join(lines, "\n")
	for _, want := range []string{
		"job j1  ", "hosts 1 up, 1 gone  procs 4 (4 running)  actor meshes 1  events 1",
		"HOSTS 2 (1 up, 1 gone)", "workers: proc mesh {hosts: 2, gpus: 2}, 4 procs (4 running)",
		"pingers: actor mesh of Pinger {hosts: 2, gpus: 2}, owner c, 4 members (3 running, 1 failed); sent 300 (100.0/s), handled 270 (90.0/s)",
		"failure pingers[1] on h0.c-2: feedTestFailure: failed on purpose",
		"h0.c-1 ! a  [2Jline with controls",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if f := row(t, lines, "HOSTS", "h0.a"); f[1] != "h0" || f[2] != "up" || f[3] != "1.5s" {
		t.Errorf("host h0: %q", f)
	}
	if f := row(t, lines, "HOSTS", "h1.a"); f[2] != "gone:" || f[3] != "lost" {
		t.Errorf("host h1: %q", f)
	}
	// RANK HOST PID STATE CPU% RSS PROC: proc 2 used 2 s of CPU a second.
	if f := row(t, lines, "workers", "2"); strings.Join(f, " ") != "2 h1 1002 running 200.0 50.0MiB h1.c-3" {
		t.Errorf("proc 2: %q", f)
	}
	// RANK PROC HOST STATE SENT SENT/S HANDLED HANDLED/S REASON
	if f := row(t, lines, "pingers", "0"); strings.Join(f, " ") != "0 h0.c-1 h0 running 300 100.0 270 90.0" {
		t.Errorf("member 0: %q", f)
	}
	if f := row(t, lines, "pingers", "1"); strings.Join(f, " ") != "1 h0.c-2 h0 failed 0 0.0 0 0.0 feedTestFailure: failed on purpose" {
		t.Errorf("member 1: %q", f)
	}
	// An ended proc's figures are its last: not shown.
	s.ProcMeshes[0].Procs[3].State, s.ProcMeshes[0].Procs[3].Reason = "failed", "killed by SIGKILL"
	if f := row(t, Lines(s, prev, 0, 0), "workers", "3"); strings.Join(f, " ") != "3 h1 1003 failed - - h1.c-4 killed by SIGKILL" {
		t.Errorf("proc 3, killed: %q", f)
	}
	if strings.ContainsAny(out, "\x1b\t") {
		t.Errorf("control characters in the view:\n%q", out)
	}

	lines = Lines(s, nil, 0, 0)
	if f := row(t, lines, "pingers", "0"); f[5] != "-" || f[7] != "-" {
		t.Errorf("member 0 without an earlier snapshot: %q", f)
	}
	if f := row(t, lines, "workers", "2"); f[4] != "-" {
		t.Errorf("proc 2 without an earlier snapshot: %q", f)
	}
	// A count that went down (a member restarted) has no rate.
	if f := row(t, Lines(prev, s, 0, 0), "pingers", "0"); f[5] != "-" {
		t.Errorf("member 0 with counts gone down: %q", f)
	}
}

// TestRenderFits: every line fits the width, cut with "…"; the view fits
// the height, titles first, cut sections say how many rows they left
// out; odd snapshots (none, no meshes, tiny terminals) do not panic.
func TestRenderFits(t *testing.T) {
	prev, s := snapshot(0, 1), snapshot(time.Second, 2)
	for _, size := range [][2]int{{40, 50}, {160, 50}, {20, 5}, {1, 1}, {5, 2}, {80, 12}, {80, 9}, {0, 3}} {
		lines := Lines(s, prev, size[0], size[1])
		if len(lines) > size[1] || len(lines) == 0 {
			t.Errorf("%dx%d: %d lines", size[0], size[1], len(lines))
		}
		for _, l := range lines {
			if size[0] > 0 && utf8.RuneCountInString(l) > size[0] {
				t.Errorf("%dx%d: line of %d runes: %q", size[0], size[1], utf8.RuneCountInString(l), l)
			}
		}
	}
	out := strings.Join(Lines(s, prev, 40, 50), "\n")
	if !strings.Contains(out, "\n  1     h0.c-2  h0    failed   0     0.…\n") {
		t.Errorf("40 columns:\n%s", out)
	}
	// 12 lines: the header, 5 titles, and 6 lines shared by the meshes
	// (a head, a row and how many more each).
	lines := Lines(s, prev, 0, 12)
	want := regexp.MustCompile(`^job j1 .*
HOSTS 2 .*
workers: .*
  RANK .*
  0 .*
  … 3 more
pingers: .*
  RANK .*
  0 .*
  … 3 more
EVENTS 1, newest last
LOG 1 lines, newest last, stderr marked !
$`)
	if got := strings.Join(lines, "\n") + "\n"; !want.MatchString(got) {
		t.Errorf("12 lines:\n%s", got)
	}
	lines = Lines(s, prev, 0, 14)
	if got := strings.Join(lines, "\n"); !strings.Contains(got, "  RANK  HOST  PID   STATE    CPU%   RSS      PROC    REASON\n  0 ") ||
		!strings.Contains(got, "\n  … 2 more\n") {
		t.Errorf("14 lines:\n%s", got)
	}
	// Too short for every title: the last line says so.
	lines = Lines(s, prev, 0, 4)
	if len(lines) != 4 || lines[3] != "… 3 more sections: a taller terminal shows them" {
		t.Errorf("4 lines:\n%s", strings.Join(lines, "\n"))
	}
	// The newest events and lines are kept.
	for i := range 20 {
		s.Logs = append(s.Logs, jobctl.LogLine{At: t0, Proc: "h0.c-1", Stream: "stdout", Text: fmt.Sprint("line ", i)})
	}
	got := strings.Join(Lines(s, prev, 0, 30), "\n")
	if !strings.HasSuffix(got, "line 19") || strings.Contains(got, "line 0\n") || !strings.Contains(got, " earlier\n") {
		t.Errorf("30 lines with 21 log lines:\n%s", got)
	}

	for _, odd := range []*jobctl.JobState{nil, {}, {Job: "j", ProcMeshes: []jobctl.ProcMeshState{{}}, ActorMeshes: []jobctl.ActorMeshState{{Members: []jobctl.MemberState{{Rank: -1}}}}}} {
		for _, size := range [][2]int{{0, 0}, {20, 5}, {1, 1}, {-1, -1}} {
			Lines(odd, odd, size[0], size[1])
		}
	}
	if got := Lines(&jobctl.JobState{Job: "j"}, nil, 20, 5); len(got) != 4 || !strings.HasPrefix(got[0], "job j  ") || got[3] != "LOG no lines yet" {
		t.Errorf("no meshes, 20x5: %q", got)
	}
}
