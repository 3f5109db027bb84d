package systest

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// startLose runs the cut program with -lose (a stream to two procs on
// each of two simulated hosts that goes on until the last host's members
// fail) under monarch run with health, and returns once the stream goes,
// with the launcher's pid and stdout lines to come.
func startLose(t *testing.T, health string) (*exec.Cmd, *strings.Builder, <-chan string) {
	t.Helper()
	dir := t.TempDir()
	hosts := testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n[health]\n"+health)
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [\"-for\", \"120s\", \"-lose\"]\nhosts = %q\n",
		filepath.Join(build(t), "cut"), hosts))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, filepath.Join(build(t), "monarch"), "run", job)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for l := range lines {
		if l == "TRAFFIC" {
			return cmd, stderr, lines
		}
	}
	cmd.Wait()
	t.Fatalf("the job ended before its stream started; stderr:\n%s", stderr)
	return nil, nil, nil
}

// failedLine waits for the cut program's "failed:" line and the end of
// the job, and returns that line and when it came; onFailed, if set, is
// called when it comes.
func failedLine(t *testing.T, cmd *exec.Cmd, stderr fmt.Stringer, lines <-chan string, onFailed func()) (string, time.Time) {
	t.Helper()
	var failed string
	var at time.Time
	var all []string
	for l := range lines {
		all = append(all, l)
		if strings.HasPrefix(l, "failed: ") {
			failed, at = l, time.Now()
			if onFailed != nil {
				onFailed()
			}
		}
	}
	if err := cmd.Wait(); err != nil || failed == "" || !strings.Contains(strings.Join(all, "\n"), "SURVIVED ") {
		t.Fatalf("exit %v; stdout:\n%s\nstderr:\n%s", err, strings.Join(all, "\n"), stderr)
	}
	return failed, at
}

// TestStoppedAgentLost: an agent stopped (SIGSTOP) keeps its link, so it
// is suspected at the host timeout and lost only at lost_after, its
// members reported failed; the other host's members go on.
func TestStoppedAgentLost(t *testing.T) {
	cmd, stderr, lines := startLose(t, "host_timeout = \"2s\"\nlost_after = \"6s\"\n")
	agent := localAgent(t, cmd.Process.Pid, 1)
	stopped := time.Now()
	syscall.Kill(agent, syscall.SIGSTOP)
	defer syscall.Kill(agent, syscall.SIGCONT)
	// Once lost, it may go on: the job's teardown then need not wait
	// out the grace a stopped agent takes to kill.
	failed, at := failedLine(t, cmd, stderr, lines, func() { syscall.Kill(agent, syscall.SIGCONT) })
	took := at.Sub(stopped)
	if !strings.Contains(failed, "{hosts: 1") || !strings.Contains(failed, "silent for 6s while its host still answers") {
		t.Fatalf("want host 1's members lost after lost_after, its host answering; got %q\nstderr:\n%s", failed, stderr)
	}
	if !strings.Contains(stderr.String(), "host agent on h1 late: silent for") {
		t.Errorf("no word of the suspicion before the loss:\n%s", stderr)
	}
	t.Logf("stopped agent reported %v after SIGSTOP (lost_after 6s): %s", took.Round(time.Millisecond), failed)
	checkNothingLeft(t, filepath.Join(build(t), "cut"))
}

// TestKilledAgentLost: an agent killed with SIGKILL is reported at once
// (its launcher reaps it; its link closes).
func TestKilledAgentLost(t *testing.T) {
	cmd, stderr, lines := startLose(t, "")
	agent := localAgent(t, cmd.Process.Pid, 1)
	killed := time.Now()
	syscall.Kill(agent, syscall.SIGKILL)
	failed, at := failedLine(t, cmd, stderr, lines, nil)
	if !strings.Contains(failed, "{hosts: 1") || !strings.Contains(failed, "SIGKILL") {
		t.Fatalf("want host 1's members failed, its agent killed; got %q\nstderr:\n%s", failed, stderr)
	}
	t.Logf("killed agent reported %v after SIGKILL: %s", at.Sub(killed).Round(time.Millisecond), failed)
	checkNothingLeft(t, filepath.Join(build(t), "cut"))
}
