package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogsOfAJob runs the example as a job with a known id, then attaches
// to it later with monarch logs: everything its procs printed is there,
// filters apply, and an unknown job lists the known ones.
func TestLogsOfAJob(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	cmd := exec.Command(filepath.Join(build(t), "getting_started"))
	cmd.Env = append(cmd.Environ(), "MONARCH_JOB=replayjob")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("example: %v\n%s", err, out)
	}
	out, stderr, code := monarch(t, "logs", "replayjob")
	if code != 0 {
		t.Fatalf("logs: exit %d: %s", code, stderr)
	}
	// Each of the 4 logging trainers printed 5 steps.
	if n := strings.Count(out, " step "); n != 20 {
		t.Fatalf("replayed %d step lines, want 20:\n%s", n, out)
	}
	out, _, _ = monarch(t, "logs", "replayjob", "--rank", "2", "--grep", "step [34]")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, "[2] step 3") || !strings.Contains(out, "[2] step 4") {
		t.Fatalf("filtered replay:\n%s", out)
	}
	out, _, _ = monarch(t, "logs", "replayjob", "--aggregate", "1h", "--grep", "step")
	if !strings.Contains(out, "[20 similar log lines]") {
		t.Fatalf("aggregated replay:\n%s", out)
	}
	_, stderr, code = monarch(t, "logs", "nosuch")
	if code == 0 || !strings.Contains(stderr, "replayjob") {
		t.Fatalf("unknown job: exit %d: %s", code, stderr)
	}
}
