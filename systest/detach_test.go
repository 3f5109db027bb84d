package systest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// TestDetachLocal: monarch run --detach on this machine prints the job's
// id alone on stdout and what to do next; logs -f, status and stop take
// that id; logs -f ends by saying how the job ended; a bare logs -f with
// nothing running says so; clean removes the job's output too.
func TestDetachLocal(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n")
	job := testenv.WriteFile(t, dir, "job.toml", holdLines(t)+"hosts = \"hosts.toml\"\n[procs]\ngpus = 2\n")
	out, stderr, code := monarch(t, "run", job, "--detach")
	id := strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(id) {
		t.Fatalf("run --detach: exit %d, stdout %q (want the id alone), stderr:\n%s", code, out, stderr)
	}
	for _, want := range []string{"monarch logs -f " + id, "monarch status " + id, "monarch stop " + id, filepath.Join(state, id+".out")} {
		if !strings.Contains(stderr, want) {
			t.Errorf("run --detach does not say %q:\n%s", want, stderr)
		}
	}
	t.Cleanup(func() { monarch(t, "stop", id) })

	follow := exec.Command(filepath.Join(build(t), "monarch"), "logs", "-f", id)
	var fout, ferr bytes.Buffer
	follow.Stdout, follow.Stderr = &fout, &ferr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- follow.Wait() }()
	t.Cleanup(func() { follow.Process.Kill() })

	waitStatus(t, id, map[string]string{"STATE": "running", "HOSTS": "2", "PROCS": "4"})
	if _, stderr, code := monarch(t, "stop", id); code != 0 {
		t.Fatalf("stop %s: exit %d: %s", id, code, stderr)
	}
	select {
	case err := <-followed:
		if err != nil {
			t.Fatalf("logs -f %s: %v\n%s", id, err, ferr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("logs -f %s still following 30s after the job was stopped", id)
	}
	if strings.Count(fout.String(), "stepping on") != 4 || !strings.Contains(ferr.String(), "monarch: job "+id+" ended: stopped by monarch stop") {
		t.Errorf("logs -f %s:\nstdout:\n%s\nstderr:\n%s", id, fout.String(), ferr.String())
	}
	out, _, _ = monarch(t, "status", id)
	for _, want := range []string{"state:       stopped by monarch stop", "hosts:       0 up (2 came up)", "procs:       0 up (4 came up)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status %s does not say %q:\n%s", id, want, out)
		}
	}

	_, stderr, code = monarch(t, "logs", "-f")
	if code != 1 || !strings.Contains(stderr, "no job runs; the newest, "+id+", ended (stopped by monarch stop)") {
		t.Errorf("a bare logs -f with nothing running: exit %d: %s", code, stderr)
	}
	_, stderr, code = monarch(t, "status", "nosuch")
	if code != 1 || !strings.Contains(stderr, `no job "nosuch"`) || !strings.Contains(stderr, id) {
		t.Errorf("status of no job: exit %d: %s", code, stderr)
	}
	if out, _, _ := monarch(t, "clean"); !strings.Contains(out, "removed "+id) {
		t.Errorf("clean:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(state, id+"*")); len(left) > 0 {
		t.Errorf("clean left %v", left)
	}
}

// TestRunOverridesRefused: the Slurm overrides of monarch run are checked
// as the hosts file's keys are, and refused for hosts that are not
// Slurm's, before anything runs.
func TestRunOverridesRefused(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "slurm.toml", "scheduler = \"slurm\"\n[slurm]\nnodes = 2\n")
	testenv.WriteFile(t, dir, "local.toml", "scheduler = \"local\"\n")
	slurm := testenv.WriteFile(t, dir, "slurm-job.toml", "program = \"/bin/true\"\nhosts = \"slurm.toml\"\n")
	local := testenv.WriteFile(t, dir, "local-job.toml", "program = \"/bin/true\"\nhosts = \"local.toml\"\n")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", slurm, "--time", "1h"}, 1, `--time "1h": want a Slurm time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS`},
		{[]string{"run", slurm, "-t", "1-25"}, 1, `--time "1-25"`},
		{[]string{"run", slurm, "-p", "a b"}, 1, `--partition "a b": want a Slurm partition name`},
		{[]string{"run", slurm, "-J", "my job"}, 1, `--job-name "my job"`},
		{[]string{"run", slurm, "-N", "0"}, 2, "--nodes 0: want 1 or more"},
		{[]string{"run", local, "-N", "2"}, 1, `--nodes: for Slurm jobs only, and ` + filepath.Join(dir, "local.toml") + ` says scheduler = "local"`},
		{[]string{"run", slurm, "-o", "x.out"}, 2, "--output is where a detached job's output goes: add --detach"},
		{[]string{"local", "--output", "x.out", "--", "/bin/true"}, 2, "--output is where a detached job's output goes"},
	}
	for _, tt := range tests {
		_, stderr, code := monarch(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("monarch %q: exit %d, stderr %q; want %d, %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
	if _, err := os.Stat("x.out"); err == nil {
		t.Error("x.out was created")
	}
}

// TestDetachLocalProgram: monarch local --detach runs a program in the
// background as monarch local would, and its end is recorded.
func TestDetachLocalProgram(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	out, stderr, code := monarch(t, "local", "--detach", "--", "/bin/sh", "-c", "echo detached; exit 3")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.Contains(stderr, "monarch status "+id) {
		t.Fatalf("local --detach: exit %d, stdout %q\n%s", code, out, stderr)
	}
	waitStatus(t, id, map[string]string{"STATE": "failed (exit 3)"})
	// A program that is no monarch client keeps no log: what it wrote is
	// in the launcher's output.
	if b, _ := os.ReadFile(filepath.Join(state, id+".out")); !bytes.Contains(b, []byte("detached\n")) {
		t.Errorf("%s.out: %q", id, b)
	}
}
