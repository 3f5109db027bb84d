package systest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// A detached Slurm job's life as monarch status and logs -f tell it: queued
// behind another job, stopped before it ran, cancelled by scancel, ended
// by its time limit.

// follower is a monarch logs -f running.
type follower struct {
	stderr func() string
	// wait returns its stdout, stderr and exit status once it has ended
	// (bounded by d).
	wait func(d time.Duration) (string, string, int)
}

// followLogs starts monarch logs -f ref.
func followLogs(t *testing.T, c *testcluster.Cluster, ref string) follower {
	t.Helper()
	cmd := exec.Command(filepath.Join(build(t), "monarch"), "logs", "-f", ref)
	cmd.Env = append(append(os.Environ(), c.Env...), "MONARCH_STATE_DIR="+stateDir(t))
	var out, errOut testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return follower{stderr: errOut.String, wait: func(d time.Duration) (string, string, int) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(d):
			t.Fatalf("monarch logs -f %s still following after %v\nstdout:\n%s\nstderr:\n%s", ref, d, out.String(), errOut.String())
		}
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}}
}

// TestSlurmQueuedThenCancelled: a job queued behind another shows as
// pending with Slurm's reason, logs -f waits for it, and monarch stop
// ends it before it runs; the running one, cancelled with scancel, says
// so in status and at the end of logs -f.
func TestSlurmQueuedThenCancelled(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	// Exclusive: the second job cannot share the nodes.
	job := heldJob(t, fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\nsbatch_args = [\"--exclusive\"]\n", c.Partition), "gpus = 1")
	first, firstSlurm := detachSlurm(t, c, job)
	waitSlurmStatus(t, c, first, "running")
	second, _ := detachSlurm(t, c, job, "--job-name", "second")
	status := waitSlurmStatus(t, c, second, "pending (Resources)")
	if strings.Count(status, "\n") != 4 {
		t.Errorf("status lists more than the two jobs:\n%s", status)
	}
	waitSecond := followLogs(t, c, second)
	waitUntil(t, 30*time.Second, "logs -f to say it waits", func() bool { return strings.Contains(waitSecond.stderr(), "waiting for it to start") })
	if out, stderr, code := runMonarch(t, c, time.Minute, nil, "stop", second); code != 0 {
		t.Fatalf("stop %s: exit %d: %s", second, code, stderr)
	} else if want := "stopped job " + second + " before it ran\n"; out != want {
		t.Errorf("stop %s: stdout %q, want %q", second, out, want)
	}
	waitSlurmStatus(t, c, second, "stopped by monarch stop before it ran")
	_, stderr, code := waitSecond.wait(30 * time.Second)
	if code != 1 || !strings.Contains(stderr, "monarch: job "+second+" is pending (Resources); waiting for it to start") ||
		!strings.Contains(stderr, "ended (stopped by monarch stop before it ran) with no output") {
		t.Errorf("logs -f of the queued job: exit %d:\n%s", code, stderr)
	}

	waitFirst := followLogs(t, c, first)
	if b, err := c.Command(t.Context(), "scancel", firstSlurm).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v: %s", firstSlurm, err, b)
	}
	waitSlurmStatus(t, c, first, "cancelled by scancel")
	out, stderr, code := waitFirst.wait(time.Minute)
	if code != 0 || strings.Count(out, "stepping on") != 2 || !strings.Contains(stderr, "monarch: job "+first+" ended: cancelled by scancel") {
		t.Errorf("logs -f of the cancelled job: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	outFile, _ := os.ReadFile(filepath.Join(stateDir(t), first+".out"))
	if !bytes.Contains(outFile, []byte("ended: cancelled by scancel")) {
		t.Errorf("the batch job's output does not end with how it ended:\n%s", outFile)
	}
	checkNothingLeft(t, program)
}

// TestSlurmTimeLimit: a job that runs into its time limit (--time 1, a
// minute) is told as ended by it, not as failed.
func TestSlurmTimeLimit(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 1\npartition = %q\nsignal_before = \"0s\"\n", c.Partition))
	// A stop grace within Slurm's KillWait (5 s here): the launcher ends
	// the job and records it before Slurm kills what is left.
	job := testenv.WriteFile(t, dir, "job.toml", holdLines(t)+"hosts = \"hosts.toml\"\nstop_grace = \"2s\"\n[procs]\ngpus = 1\n")
	id, _ := detachSlurm(t, c, job, "--time", "1")
	t.Cleanup(func() { waitNodeResponds(t, c, c.Hosts[0]) })
	waitSlurmStatus(t, c, id, "running")
	start := time.Now()
	// Slurm ends a job within its time limit plus its check interval.
	waitSlurmStatus(t, c, id, "time limit")
	t.Logf("ended by the time limit %v after it ran", time.Since(start).Round(time.Second))
	out, _, _ := runMonarch(t, c, 30*time.Second, nil, "status", id)
	if !strings.Contains(out, "state:       time limit") {
		t.Errorf("status %s:\n%s", id, out)
	}
	checkNothingLeft(t, program)
}

// TestSSHDetach: over ssh, --detach runs the launcher in the background
// here, under the id it prints, as on Slurm.
func TestSSHDetach(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := heldJob(t, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig), "gpus = 1")
	out, stderr, code := runMonarch(t, c, time.Minute, nil, "run", "--detach", job)
	id := strings.TrimSpace(out)
	if code != 0 || !strings.Contains(stderr, "monarch stop "+id) {
		t.Fatalf("--detach: exit %d, stdout %q\n%s", code, out, stderr)
	}
	t.Cleanup(func() { runMonarch(t, c, time.Minute, nil, "stop", id) })
	waitSlurmStatus(t, c, id, "running")
	waitUntil(t, time.Minute, "both hosts' procs in the log", func() bool {
		out, _, _ := runMonarch(t, c, 30*time.Second, nil, "logs", id)
		return strings.Count(out, "stepping on") == 2
	})
	if _, stderr, code := runMonarch(t, c, time.Minute, nil, "stop", id); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	waitSlurmStatus(t, c, id, "stopped by monarch stop")
	checkNothingLeft(t, program)
}

// TestSlurmOverrideRefused: a --nodes the partition cannot meet is named
// as the flag, not as the hosts file's key it overrides.
func TestSlurmOverrideRefused(t *testing.T) {
	c := testcluster.Get(t)
	job := clusterJob(t, "/bin/true", fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 1\npartition = %q\n", c.Partition), "gpus = 1")
	_, stderr, code := runMonarch(t, c, time.Minute, nil, "run", job, "-N", "3")
	if want := "--nodes 3 (over [slurm] nodes): partition " + c.Partition + " has 2 nodes"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("run -N 3 on a 2-node partition: exit %d, want %q:\n%s", code, want, stderr)
	}
}
