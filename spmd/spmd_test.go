package spmd

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

func TestParseSignal(t *testing.T) {
	for name, want := range map[string]syscall.Signal{"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM,
		"INT": syscall.SIGINT, "HUP": syscall.SIGHUP, "none": 0} {
		if got, err := ParseSignal(name); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, bad := range []string{"", "SIGUSR1", "usr1", "KILL", "9"} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("ParseSignal(%q) took it", bad)
		}
	}
}

func TestSignalName(t *testing.T) {
	if got := signalName(syscall.SIGUSR2); got != "SIGUSR2" {
		t.Errorf("signalName(SIGUSR2) = %q", got)
	}
}

// TestFailureOf: the report names the host once, and a signal by name.
func TestFailureOf(t *testing.T) {
	f, how := failureOf(actorrt.ProcEnd{Host: "h2", Status: 137, Reason: "killed by SIGKILL (host h2)"}, []string{"oom"})
	want := actorrt.Failure{Summary: "rank 0 on h2 killed by SIGKILL", Mesh: MeshName, Rank: 0, Host: "h2", Exit: 137, Signal: "SIGKILL", Tail: []string{"oom"}}
	if how != "killed by SIGKILL" || f.Summary != want.Summary || f.Signal != want.Signal || f.Exit != want.Exit ||
		f.Host != want.Host || f.Mesh != want.Mesh || !slices.Equal(f.Tail, want.Tail) {
		t.Errorf("failureOf: %+v, %q; want %+v", f, how, want)
	}
	f, how = failureOf(actorrt.ProcEnd{Host: "h1", Status: 3, Reason: "exited with status 3 (host h1)"}, nil)
	if how != "exited with status 3" || f.Signal != "" || f.Exit != 3 || f.Summary != "rank 0 on h1 exited with status 3" {
		t.Errorf("failureOf: %+v, %q", f, how)
	}
}

// TestRunNegativeRestarts: max restarts below zero is refused before
// anything starts.
func TestRunNegativeRestarts(t *testing.T) {
	err := Run(context.Background(), Job{Command: []string{"true"}, MaxRestarts: -1})
	if err == nil || err.Error() != "spmd: max restarts -1: want 0 or more" {
		t.Errorf("Run: %v", err)
	}
	if restartsText(1) != "1 restart" || restartsText(3) != "3 restarts" {
		t.Errorf("restartsText: %q, %q", restartsText(1), restartsText(3))
	}
}

// end is rank's end on host, status st, at ms milliseconds past t0 by
// its host's clock (ms < 0: nobody saw it end, a host lost).
func end(rank int, host string, st, ms int) actorrt.ProcEnd {
	e := actorrt.ProcEnd{Proc: fmt.Sprintf("rank%d", rank), Host: host, Status: st, Reason: fmt.Sprintf("exited with status %d (host %s)", st, host)}
	if ms >= 0 {
		e.At = time.Unix(1_800_000_000, 0).Add(time.Duration(ms) * time.Millisecond)
	}
	return e
}

// wrote is e, whose last stderr line was read at ms milliseconds past
// t0.
func wrote(e actorrt.ProcEnd, ms int) actorrt.ProcEnd {
	e.ErrAt = time.Unix(1_800_000_000, 0).Add(time.Duration(ms) * time.Millisecond)
	return e
}

// TestFirstFailure: of the failures heard (in the order given), the one
// reported is the one that happened first by its host's clock, whatever
// the order they were heard in; an end whose time is unknown keeps its
// place as heard.
func TestFirstFailure(t *testing.T) {
	for _, c := range []struct {
		name  string
		heard []actorrt.ProcEnd
		want  string
	}{
		{"heard in order", []actorrt.ProcEnd{end(1, "h0", 1, 0), end(0, "h0", 1, 80)}, "rank1"},
		// The flake: rank 1 raised, rank 0 failed when its peer went
		// away, and rank 0's end was heard first.
		{"heard out of order, one host", []actorrt.ProcEnd{end(0, "h0", 1, 80), end(1, "h0", 1, 0)}, "rank1"},
		{"heard out of order, two hosts", []actorrt.ProcEnd{end(2, "h1", 1, 80), end(3, "h1", 1, 90), end(1, "h0", 1, 0)}, "rank1"},
		{"the ranks stopped after it", []actorrt.ProcEnd{end(1, "h0", 1, 10), end(0, "h0", 143, 400), end(2, "h1", 143, 401)}, "rank1"},
		{"a host lost heard first", []actorrt.ProcEnd{end(2, "h1", -1, -1), end(1, "h0", 1, 0)}, "rank2"},
		{"a host lost heard later", []actorrt.ProcEnd{end(1, "h0", 1, 50), end(2, "h1", -1, -1)}, "rank1"},
		{"a tie keeps the order heard", []actorrt.ProcEnd{end(3, "h1", 1, 5), end(1, "h0", 1, 5)}, "rank3"},
	} {
		if got := firstFailure(c.heard); got.Proc != c.want {
			t.Errorf("%s: %s reported, want %s", c.name, got.Proc, c.want)
		}
	}
}

// TestFirstFailureByError: a rank that wrote its error (a traceback) and
// then ended is placed at its error, before the ends it caused, though
// it ended after them; a rank whose last words are not its error (it was
// stopped, a signal killed it, or they came long before its end) is
// placed at its end.
func TestFirstFailureByError(t *testing.T) {
	stopped := func(e actorrt.ProcEnd) actorrt.ProcEnd { e.Stopped = true; return e }
	killed := end(3, "h1", 137, 100)
	killed.Reason = "killed by SIGKILL (host h1)"
	for _, c := range []struct {
		name  string
		heard []actorrt.ProcEnd
		want  string
	}{
		// The flake left by the end times: rank 1 raised (its
		// traceback at 10 ms), its peers failed when it closed their
		// connections (theirs at 60 and 70) and ended, at 80 and 90,
		// before rank 1 did (at 120), winding down.
		{"its peers ended first, one host", []actorrt.ProcEnd{wrote(end(0, "h0", 1, 80), 60), wrote(end(1, "h0", 1, 120), 10)}, "rank1"},
		{"its peers ended first, two hosts", []actorrt.ProcEnd{wrote(end(2, "h1", 1, 80), 60), wrote(end(3, "h1", 1, 90), 70), wrote(end(1, "h0", 1, 120), 10)}, "rank1"},
		{"a silent end before its error", []actorrt.ProcEnd{wrote(end(1, "h0", 1, 120), 10), end(2, "h1", 1, 5)}, "rank2"},
		{"a silent end after its error", []actorrt.ProcEnd{end(2, "h1", 1, 50), wrote(end(1, "h0", 1, 120), 10)}, "rank1"},
		{"a rank stopped, that wrote before", []actorrt.ProcEnd{wrote(end(1, "h0", 1, 120), 30), wrote(stopped(end(2, "h1", 143, 400)), 5)}, "rank1"},
		{"a rank killed, that wrote before", []actorrt.ProcEnd{wrote(killed, 5), wrote(end(1, "h0", 1, 120), 30)}, "rank1"},
		{"a rank's old warning", []actorrt.ProcEnd{wrote(end(2, "h1", 1, 100), -5000), wrote(end(1, "h0", 1, 120), 30)}, "rank1"},
		{"an error just inside its bound", []actorrt.ProcEnd{wrote(end(2, "h1", 1, 100), 100-2000), wrote(end(1, "h0", 1, 120), 30)}, "rank2"},
		{"a host lost heard first", []actorrt.ProcEnd{end(2, "h1", -1, -1), wrote(end(1, "h0", 1, 120), 10)}, "rank2"},
		{"a host lost heard later", []actorrt.ProcEnd{wrote(end(1, "h0", 1, 120), 10), end(2, "h1", -1, -1)}, "rank1"},
	} {
		if got := firstFailure(c.heard); got.Proc != c.want {
			t.Errorf("%s: %s reported, want %s", c.name, got.Proc, c.want)
		}
	}
}

// TestRunHearsEnds: a run hears its ranks' ends in the order they
// arrive; once the first failure is heard, the rest are gathered (at
// most until the deadline), and the failure reported is the earliest,
// not the one heard first; the ends that are not failures are not kept.
func TestRunHearsEnds(t *testing.T) {
	ends := make(chan actorrt.ProcEnd, 4)
	r := &run{ends: ends, left: 4}
	if !r.heard(end(0, "h0", 1, 80)) {
		t.Fatal("a rank's exit with status 1 was not a failure")
	}
	for _, e := range []actorrt.ProcEnd{end(3, "h1", 0, 20), end(1, "h0", 1, 0), end(2, "h1", 143, 300)} {
		ends <- e
	}
	r.waitEnds(context.Background(), time.Now().Add(time.Minute))
	if r.left != 0 || len(r.failures) != 3 {
		t.Fatalf("%d ranks left, failures %v; want 0 left and the 3 ends not 0", r.left, r.failures)
	}
	if got := firstFailure(r.failures); got.Proc != "rank1" {
		t.Fatalf("%s reported, want rank1 (the earliest)", got.Proc)
	}
	// An end that never comes is waited for until the deadline only.
	r = &run{ends: make(chan actorrt.ProcEnd), left: 1}
	r.waitEnds(context.Background(), time.Now().Add(10*time.Millisecond))
	if r.left != 1 {
		t.Fatalf("%d left", r.left)
	}
	// Or until ctx ends (the job stopped meanwhile).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	r.waitEnds(ctx, time.Now().Add(time.Hour))
	if r.left != 1 || time.Since(start) > time.Minute {
		t.Fatalf("%d left after %v", r.left, time.Since(start))
	}
}

// TestJobNodes: MinHosts:MaxHosts resolved against the job's hosts: 0
// is every host (MAX) and MAX (MIN); MAX beyond the hosts, or MIN past
// MAX, is refused before anything starts.
func TestJobNodes(t *testing.T) {
	for _, tt := range []struct {
		min, max, hosts int
		want            string
	}{
		{0, 0, 3, "3:3"},
		{1, 2, 2, "1:2"},
		{1, 2, 3, "1:2"},
		{2, 0, 4, "2:4"},
		{1, 3, 2, "spmd: nnodes 1:3: the job has 2 hosts, fewer than MAX"},
		{2, 2, 1, "spmd: nnodes 2:2: the job has 1 host, fewer than MAX"},
		{3, 2, 4, "spmd: nnodes 3:2: want 1 <= MIN <= MAX"},
		{-1, 2, 4, "spmd: nnodes -1:2: want 1 <= MIN <= MAX"},
	} {
		n, err := Job{MinHosts: tt.min, MaxHosts: tt.max}.nodes(tt.hosts)
		got := n.String()
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("nnodes %d:%d of %d hosts: %s, want %s", tt.min, tt.max, tt.hosts, got, tt.want)
		}
	}
}
