package systest

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
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

// TestLogsFollow attaches monarch logs -f to a running job: it replays the
// lines so far, then ends by itself when the job does.
func TestLogsFollow(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	job := exec.Command(filepath.Join(build(t), "monarch"), append([]string{"local", "--hosts", "1", "--"}, holdArgv(t)...)...)
	var jobErr testenv.SyncBuffer
	job.Stderr = &jobErr
	out, err := job.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	jobDone := make(chan struct{})
	defer func() { job.Process.Kill(); <-jobDone }()
	sc := bufio.NewScanner(out)
	timer := time.AfterFunc(60*time.Second, func() { job.Process.Kill() })
	defer timer.Stop()
	for sc.Scan() && !isHolding(sc.Text()) {
	}
	go func() {
		for sc.Scan() {
		}
		job.Wait()
		close(jobDone)
	}()
	id := regexp.MustCompile(`monarch: job (\S+):`).FindStringSubmatch(jobErr.String())
	if id == nil {
		t.Fatalf("no job id on stderr:\n%s", jobErr.String())
	}
	follow := exec.Command(filepath.Join(build(t), "monarch"), "logs", "-f", id[1])
	var fout testenv.SyncBuffer
	follow.Stdout = &fout
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	// The replay comes first; then the job ends and so does the follow.
	for deadline := time.Now().Add(20 * time.Second); strings.Count(fout.String(), "stepping on") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the follow printed no replay within 20s:\n%s", fout.String())
		}
	}
	select {
	case err := <-done:
		t.Fatalf("follow ended while the job runs: %v", err)
	default:
	}
	job.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
	case <-time.After(30 * time.Second):
		follow.Process.Kill()
		t.Fatal("follow still running 30s after the job was stopped")
	}
	if n := strings.Count(fout.String(), "stepping on"); n != 2 {
		t.Fatalf("followed %d lines, want 2 (2 procs):\n%s", n, fout.String())
	}
}

// TestLogsSimulatedHosts: the simulated hosts of monarch local are h0,
// h1 in the job's log, as in status and the system logs; a --host or
// --rank that matches nothing is an error naming what the job has (in
// follow mode, once the job has ended: hosts may still come).
func TestLogsSimulatedHosts(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	h := startHold(t, nil, append([]string{filepath.Join(build(t), "monarch"), "local", "--hosts", "2", "--"}, holdArgv(t)...)...)
	var out string
	for deadline := time.Now().Add(20 * time.Second); strings.Count(out, "stepping on") < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("logs --host h0 printed no 2 lines within 20s:\n%s", out)
		}
		// (An error until h0's first line is in: the job has no such
		// line yet.)
		out, _, _ = monarch(t, "logs", h.job, "--host", "h0")
	}
	if n := strings.Count(out, "\n"); n != 2 || !strings.Contains(out, "[0] stepping on") || !strings.Contains(out, "[1] stepping on") {
		t.Fatalf("logs --host h0:\n%s", out)
	}
	has := "job " + h.job + " has hosts h0 (ranks 0-1), h1 (ranks 2-3)"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--host", "h9"}, "logs: no lines from host h9; " + has},
		{[]string{"--host", "h0", "--rank", "3"}, "logs: no lines from host h0 of rank 3; " + has},
		{[]string{"--stream", "stderr"}, "logs: no stderr lines; " + has + ", lines on stdout"},
	} {
		out, stderr, code := monarch(t, append([]string{"logs", h.job}, tt.args...)...)
		if code == 0 || out != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("logs %v: exit %d, stdout %q, stderr %q; want an error %q", tt.args, code, out, stderr, tt.want)
		}
	}
	// Following: no error while the job runs; once it has ended, the same.
	follow := exec.Command(filepath.Join(build(t), "monarch"), "logs", "-f", h.job, "--host", "h9")
	var fout, ferr testenv.SyncBuffer
	follow.Stdout, follow.Stderr = &fout, &ferr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	defer follow.Process.Kill()
	if _, _, code := monarch(t, "logs", h.job, "--host", "h1"); code != 0 {
		t.Errorf("logs --host h1: exit %d", code)
	}
	select {
	case err := <-done:
		t.Fatalf("logs -f --host h9 ended while the job runs: %v: %s", err, ferr.String())
	default:
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.wait(t)
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(ferr.String(), "logs: no lines from host h9; "+has) {
			t.Errorf("logs -f --host h9 after the end: %v, stdout %q, stderr %q", err, fout.String(), ferr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f still running 30s after the job ended")
	}
}
