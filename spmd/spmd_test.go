package spmd

import (
	"context"
	"slices"
	"syscall"
	"testing"

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
