package systest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// TestExec: monarch exec runs a command on every host of a running job
// (the two simulated hosts and the client's), each line prefixed by its
// host, and exits with the worst status, naming the hosts that failed; a
// missing command shows each host's error; an unknown host, or no --host
// nor --all, is refused; Ctrl-C stops the commands (SIGTERM, then SIGKILL
// after the grace) and exits 130 with nothing left running; a job that
// ended says so.
func TestExec(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	run := startStacksJob(t, 2, 1)
	job := run.job

	// Every host, once each. MONARCH_HOST_NAME names a simulated host
	// (its agent's environment); the client's host has none.
	out, stderr, code := monarch(t, "exec", job, "--all", "--", "sh", "-c", `echo "${MONARCH_HOST_NAME:-client}-ish marker"`)
	if code != 0 {
		t.Fatalf("exec --all: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	lineRe := regexp.MustCompile(`^\[(\S+)\] (\S+)-ish marker$`)
	var hosts []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		m := lineRe.FindStringSubmatch(l)
		if m == nil || m[2] != "client" && m[1] != m[2] {
			t.Errorf("exec --all: line %q: want [HOST] HOST-ish marker", l)
			continue
		}
		hosts = append(hosts, m[1])
	}
	slices.Sort(hosts)
	if len(hosts) != 3 || len(slices.Compact(slices.Clone(hosts))) != 3 || !slices.Contains(hosts, "h0") || !slices.Contains(hosts, "h1") {
		t.Errorf("exec --all: the hosts' lines are %q; want h0, h1 and the client's host, once each:\n%s", hosts, out)
	}
	for _, h := range hosts {
		if !strings.Contains(stderr, "["+h+"] exited with status 0\n") {
			t.Errorf("exec --all: no status 0 for %s on stderr:\n%s", h, stderr)
		}
	}

	// A failure on one host is the status, and names the host.
	out, stderr, code = monarch(t, "exec", job, "--all", "--", "sh", "-c", `echo out; test "$MONARCH_HOST_NAME" != h1 || exit 3`)
	if code != 3 || !strings.Contains(stderr, "[h1] exited with status 3\n") || !strings.Contains(stderr, "failed on 1 of 3 hosts: h1 (status 3)") ||
		strings.Count(out, "] out\n") != 3 {
		t.Errorf("exec with exit 3 on h1: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}

	// A missing command: each host's error.
	_, stderr, code = monarch(t, "exec", job, "--host", "h0", "--host", "h1", "--", "monarch-no-such-command")
	if code != 127 {
		t.Errorf("exec of a missing command: exit %d, want 127; stderr:\n%s", code, stderr)
	}
	for _, h := range []string{"h0", "h1"} {
		if !strings.Contains(stderr, "["+h+"] cannot run monarch-no-such-command on "+h+": ") {
			t.Errorf("exec of a missing command: no error of %s:\n%s", h, stderr)
		}
	}

	// Bad command lines.
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--host", "h7", "--", "true"}, 1, `no host "h7" in the job; its hosts: h0, h1, `},
		{[]string{"--", "true"}, 2, "say where to run true: --host H (repeat for more) or --all"},
		{[]string{"--all", "--host", "h0", "--", "true"}, 2, "--host and --all: give one of them"},
		{[]string{"--all"}, 2, "no command to run"},
	} {
		_, stderr, code := monarch(t, append([]string{"exec", job}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("exec %v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}

	// Ctrl-C: the commands are stopped, SIGKILL after the grace for those
	// that ignore SIGTERM, and nothing is left.
	const sleeper = "30.27" // a sleep no other test runs
	cmd := exec.Command(filepath.Join(build(t), "monarch"), "exec", job, "--all", "--grace", "1s", "--", "sh", "-c",
		`if [ "$MONARCH_HOST_NAME" = h1 ]; then trap "" TERM; fi; echo started; sleep `+sleeper)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer killer.Stop()
	sc := bufio.NewScanner(pipe)
	for started := 0; started < 3 && sc.Scan(); {
		if strings.HasSuffix(sc.Text(), "] started") {
			started++
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exec interrupted: %v, want exit 130; stderr:\n%s", err, errBuf.String())
	}
	for _, want := range []string{"[h0] killed by SIGTERM (stopped)\n", "[h1] killed by SIGKILL (stopped)\n"} {
		if !strings.Contains(errBuf.String(), want) {
			t.Errorf("exec interrupted: stderr lacks %q:\n%s", want, errBuf.String())
		}
	}
	if left := waitGone(t, "sleep\x00"+sleeper+"\x00", 10*time.Second); len(left) > 0 {
		t.Errorf("processes left after the interrupted exec: %v", left)
	}

	if _, stderr, code := monarch(t, "stop", job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	run.wait(t)
	_, stderr, code = monarch(t, "exec", job, "--all", "--", "true")
	if code != 1 || !strings.Contains(stderr, "exec: job "+job+" has ended (") || !strings.Contains(stderr, "monarch logs "+job) {
		t.Errorf("exec in an ended job: exit %d, stderr %q", code, stderr)
	}
}

// TestExecTurnedOff: a job file with [exec] enabled = false refuses
// monarch exec, naming the file and line.
func TestExecTurnedOff(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	dir := t.TempDir()
	jobFile := testenv.WriteFile(t, dir, "job.toml", "program = \""+filepath.Join(build(t), "inspect")+"\"\n\n[exec]\nenabled = false\n")
	run := startStacksRun(t, 2, 1, "local", "--hosts", "2", jobFile)
	_, stderr, code := monarch(t, "exec", run.job, "--all", "--", "true")
	if want := "exec is turned off for job " + run.job + " by " + jobFile + ":4 ([exec] enabled = false)"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exec in a job that turns it off: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if _, stderr, code := monarch(t, "stop", run.job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	run.wait(t)
}

// waitGone waits, at most d, until no process has the command line
// cmdline (its words, each ended by a NUL), and returns the pids of those
// that still have it.
func waitGone(t *testing.T, cmdline string, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []string
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range dirs {
			if b, err := os.ReadFile(filepath.Join(p, "cmdline")); err == nil && string(b) == cmdline {
				left = append(left, filepath.Base(p))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
