package systest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// stacksJobRun is a run of the stacks test program under monarch local.
type stacksJobRun struct {
	*held
	pids []int // the blocked workers' pids
}

// startStacksJob runs the inspect program (its blockers) on hosts simulated hosts with
// gpus procs each and waits (bounded) until every worker has blocked.
func startStacksJob(t testing.TB, hosts, gpus int) *stacksJobRun {
	t.Helper()
	return startStacksRun(t, hosts*gpus, gpus, "local", "--hosts", strconv.Itoa(hosts), "--", filepath.Join(build(t), "inspect"))
}

// startStacksRun runs monarch with args, a job of the inspect program (its blockers)
// with gpus procs a host, and waits (bounded) until its workers have
// blocked.
func startStacksRun(t testing.TB, workers, gpus int, args ...string) *stacksJobRun {
	t.Helper()
	run := &stacksJobRun{}
	pidRe := regexp.MustCompile(`blocking in stacksTestBlockHere pid=(\d+)`)
	ready := false
	run.held = startJob(t, args, []string{"INSPECT_GPUS=" + strconv.Itoa(gpus)}, func(line string) bool {
		if line == "READY" {
			ready = true
		}
		if m := pidRe.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[1])
			run.pids = append(run.pids, pid)
		}
		return ready && len(run.pids) >= workers
	})
	return run
}

// startLocalJob runs the test program prog under monarch local on hosts
// simulated hosts (see startJob).
func startLocalJob(t testing.TB, hosts int, prog string, env []string, ready func(line string) bool) *held {
	t.Helper()
	return startJob(t, []string{"local", "--hosts", strconv.Itoa(hosts), "--", filepath.Join(build(t), prog)}, env, ready)
}

// startJob runs monarch with args, with env added, until ready says so
// (see startUntil).
func startJob(t testing.TB, args, env []string, ready func(line string) bool) *held {
	t.Helper()
	return startUntil(t, env, append([]string{filepath.Join(build(t), "monarch")}, args...), ready)
}

// TestStacks: monarch stacks names the function the actors block in,
// their actor and endpoint, prints the stack the workers share once with
// their ranks, says why the command proc has none; --rank, --mesh and
// --host select; what does not exist is an error naming it; a proc that
// does not answer is listed; after the job ends, it says so and the
// socket is gone.
func TestStacks(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	run := startStacksJob(t, 2, 2)
	job := run.job

	sock := filepath.Join(state, job+".sock")
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket %s: %v, mode %v; want a socket, 0600", sock, err, fi)
	}

	out, stderr, code := monarch(t, "stacks", job)
	if code != 0 {
		t.Fatalf("stacks: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"job " + job + ": stacks of 5 of 6 procs",
		"main.stacksTestBlockHere(",
		"main.(*Blocker).Block(",
		"== workers 0-3 (4 procs): 1 goroutine each [chan receive]",
		"\n== running actors\n",
		"sleepers 0 (", "a command proc (WithCommand)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stacks output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "main.stacksTestBlockHere("); n != 1 {
		t.Errorf("the workers' shared stack is printed %d times, want once:\n%s", n, out)
	}
	for r := range 4 {
		// Its mailbox's call, and its two concurrent calls, each with its time.
		for endpoint, n := range map[string]int{"Block": 1, "Wait": 2} {
			re := regexp.MustCompile(`(?m)^workers ` + strconv.Itoa(r) + ` \(\S+ on h[01]\): blockers\[` + strconv.Itoa(r) + `\] ` + endpoint + ` for \d`)
			if got := len(re.FindAllString(out, -1)); got != n {
				t.Errorf("%d running %s of blockers[%d] on workers %d, want %d:\n%s", got, endpoint, r, r, n, out)
			}
		}
	}
	if !strings.Contains(out, "== workers 0-3 (4 procs): 2 goroutines each [chan receive]\nmain.stacksTestWaitHere(") {
		t.Errorf("stacks output lacks the concurrent calls' goroutines, 2 per worker:\n%s", out)
	}

	// Selections.
	out, stderr, code = monarch(t, "stacks", job, "--rank", "2", "--mesh", "workers")
	if code != 0 || !strings.Contains(out, "stacks of 1 of 1 procs") || !strings.Contains(out, "== workers 2: 1 goroutine each [chan receive]") ||
		strings.Contains(out, "workers 0") || strings.Contains(out, "client") {
		t.Errorf("stacks --rank 2 --mesh workers: exit %d, %s\n%s", code, stderr, out)
	}
	out, stderr, code = monarch(t, "stacks", "--host", "h1") // the newest running job
	if code != 0 || !strings.Contains(out, "== workers 2-3 (2 procs)") || strings.Contains(out, "workers 0 ") {
		t.Errorf("stacks --host h1: exit %d, %s\n%s", code, stderr, out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rank", "9"}, "no rank 9: mesh workers has ranks 0-3, mesh sleepers has ranks 0-0"},
		{[]string{"--mesh", "nope"}, `no proc mesh "nope"; the job's proc meshes: workers, sleepers`},
		{[]string{"--host", "h7"}, `no proc of the job on host "h7"`},
		{[]string{"--timeout", "0s"}, "--timeout 0s: want a positive duration"},
	} {
		_, stderr, code := monarch(t, append([]string{"stacks", job}, tt.args...)...)
		if code != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("stacks %v: exit %d, stderr %q; want 1 and %q", tt.args, code, stderr, tt.want)
		}
	}
	if _, stderr, code := monarch(t, "stacks", "nosuchjob"); code != 1 || !strings.Contains(stderr, `no job "nosuchjob"`) {
		t.Errorf("stacks nosuchjob: exit %d, stderr %q", code, stderr)
	}

	// A proc that cannot answer (stopped: its agent gives it the host
	// timeout, 5 s, before it kills it) is listed as such.
	pid := run.pids[0]
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = monarch(t, "stacks", job, "--mesh", "workers", "--timeout", "1s")
	syscall.Kill(pid, syscall.SIGCONT)
	if code != 0 || !strings.Contains(out, "stacks of 3 of 4 procs") || !regexp.MustCompile(`(?m)^workers \d \(\S+ on h[01]\): no answer within 1s$`).MatchString(out) ||
		!strings.Contains(out, "== workers") {
		t.Errorf("stacks with a stopped proc: exit %d, %s\n%s", code, stderr, out)
	}

	if _, stderr, code := monarch(t, "stop", job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	run.wait(t)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("control socket %s still there after the job ended: %v", sock, err)
	}
	_, stderr, code = monarch(t, "stacks", job)
	if code != 1 || !strings.Contains(stderr, "job "+job+" has ended (") || !strings.Contains(stderr, "monarch logs "+job) {
		t.Errorf("stacks of an ended job: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = monarch(t, "stacks")
	if code != 1 || !strings.Contains(stderr, "no job runs; the newest, "+job+", ended") {
		t.Errorf("stacks with no job running: exit %d, stderr %q", code, stderr)
	}
}
