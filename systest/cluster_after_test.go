package systest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// Jobs that wait on jobs in Slurm's queue: monarch run --detach --after-ok
// submits with sbatch --dependency=afterok:ID --kill-on-invalid-dep=yes.

// slurmShJob writes a Slurm job file (one node) whose program is sh -c
// script.
func slurmShJob(t *testing.T, c *testcluster.Cluster, script string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 1\npartition = %q\n", c.Partition))
	return testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = \"/bin/sh\"\nargs = [\"-c\", %q]\nhosts = \"hosts.toml\"\n", script))
}

// waitSlurmState polls monarch status JOB (at most 3 minutes) until its
// state line is state; it returns what status said.
func waitSlurmState(t *testing.T, c *testcluster.Cluster, job, state string) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		out, _, _ = runMonarch(t, c, 30*time.Second, nil, "status", job)
		if strings.Contains(out, "state:       "+state+"\n") {
			return out
		}
	}
	t.Fatalf("status %s never said %q:\n%s", job, state, out)
	return ""
}

// TestSlurmAfterOKChain: evaluate, submitted --after-ok train, waits in
// Slurm's queue and runs once train is done: its program finds the file
// train's made at its end.
func TestSlurmAfterOKChain(t *testing.T) {
	c := testcluster.Get(t)
	made := filepath.Join(t.TempDir(), "trained")
	train, trainSlurm := detachSlurm(t, c, slurmShJob(t, c, "sleep 3; touch "+made))
	eval, evalSlurm := detachSlurm(t, c, slurmShJob(t, c, "test -e "+made), "--after-ok", train)
	out, _, _ := runMonarch(t, c, 30*time.Second, nil, "status", eval)
	if !strings.Contains(out, "state:       pending (Dependency)\n") && !strings.Contains(out, "state:       done\n") && !strings.Contains(out, "state:       running\n") {
		t.Errorf("status %s while train runs:\n%s", eval, out)
	}
	b, err := c.Command(t.Context(), "scontrol", "-o", "show", "job", evalSlurm).Output()
	if err != nil || !strings.Contains(string(b), "Dependency=afterok:"+trainSlurm) && !strings.Contains(string(b), "Dependency=(null)") {
		t.Errorf("scontrol show job %s: %v\n%s", evalSlurm, err, b)
	}
	waitSlurmState(t, c, train, "done")
	waitSlurmState(t, c, eval, "done")
}

// TestSlurmAfterOKFails: when train fails, Slurm ends evaluate before it
// runs (--kill-on-invalid-dep), and status says why in words.
func TestSlurmAfterOKFails(t *testing.T) {
	c := testcluster.Get(t)
	ran := filepath.Join(t.TempDir(), "ran")
	train, _ := detachSlurm(t, c, slurmShJob(t, c, "sleep 2; exit 3"))
	eval, _ := detachSlurm(t, c, slurmShJob(t, c, "touch "+ran), "--after-ok", train)
	waitSlurmState(t, c, train, "failed (exit 3)")
	waitSlurmState(t, c, eval, "dependency never satisfied: job "+train+" failed (exit 3)")
	if _, err := os.Stat(ran); err == nil {
		t.Error("evaluate's program ran")
	}
	// A job that never ran in Slurm's queue cannot be waited for there.
	t.Setenv("MONARCH_STATE_DIR", stateDir(t))
	local, open := gate(t, "0")
	defer open()
	_, stderr, code := runMonarch(t, c, time.Minute, nil, "run", "--detach", "--after-ok", local, slurmShJob(t, c, "true"))
	if want := "--after-ok " + local + ": the job runs with local, never in Slurm's queue, so Slurm cannot wait for it"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("--after-ok a local job on Slurm: exit %d, want %q:\n%s", code, want, stderr)
	}
}

// TestSlurmForegroundAfter: in the foreground, outside an allocation, the
// launcher waits for the dependency itself, then runs the job under
// salloc under the id it waited as: one job, one record.
func TestSlurmForegroundAfter(t *testing.T) {
	c := testcluster.Get(t)
	made := filepath.Join(t.TempDir(), "trained")
	train, _ := detachSlurm(t, c, slurmShJob(t, c, "sleep 2; touch "+made))
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", "--after-ok", train, slurmShJob(t, c, "test -e "+made+" && echo evaluated"))
	m := regexp.MustCompile(`monarch: job (\S+) waits to start: after ok ` + regexp.QuoteMeta(train) + `\n`).FindStringSubmatch(stderr)
	if code != 0 || out != "evaluated\n" || m == nil {
		t.Fatalf("run --after-ok: exit %d, stdout %q\n%s", code, out, stderr)
	}
	status := waitSlurmState(t, c, m[1], "done")
	if !strings.Contains(status, "scheduler:   slurm\n") || !strings.Contains(status, "slurm job:") {
		t.Errorf("status %s: not the salloc'd job's record:\n%s", m[1], status)
	}
}

// TestSSHAfterOK: with ssh hosts the launcher waits, and a dependency that
// fails ends the job before any host is touched.
func TestSSHAfterOK(t *testing.T) {
	c := testcluster.Get(t)
	t.Setenv("MONARCH_STATE_DIR", stateDir(t))
	train, open := gate(t, "1")
	job := heldJob(t, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig), "gpus = 1")
	out, stderr, code := runMonarch(t, c, time.Minute, nil, "run", "--detach", "--after-ok", train, job)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("run --detach --after-ok: exit %d, stdout %q\n%s", code, out, stderr)
	}
	waitSlurmState(t, c, id, "pending (after ok "+train+")")
	open()
	status := waitSlurmState(t, c, id, "dependency never satisfied: job "+train+" failed (exit 1)")
	if !strings.Contains(status, "hosts:       0 up (0 came up)") {
		t.Errorf("status %s:\n%s", id, status)
	}
}
