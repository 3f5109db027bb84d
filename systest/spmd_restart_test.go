package systest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// The gang restarts of an SPMD job ([spmd] max_restarts, monarch local
// --max-restarts): the PyTorch all-reduce on 2 simulated hosts x 2 procs
// whose rank 1 raises on its first attempt only (FAIL_ONCE, a marker file
// in the test's temp dir).

// restartJob writes an [spmd] job of the all-reduce on the 2 local hosts
// with max_restarts n.
func restartJob(t *testing.T, python, script string, n int) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n")
	return testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("hosts = \"hosts.toml\"\n\n[spmd]\ncommand = [%q, %q]\nmax_restarts = %d\n\n[procs]\ngpus = 2\n", python, script, n))
}

var attemptLine = regexp.MustCompile(`rank (\d) attempt (\d+) port (\d+)$`)

// attempts reads the ranks' "attempt" lines: the MASTER_PORT each
// attempt's ranks got, and how many ranks said so.
func attempts(out string) (ports map[string]map[string]bool, ranks map[string]int) {
	ports, ranks = map[string]map[string]bool{}, map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if m := attemptLine.FindStringSubmatch(line); m != nil {
			if ports[m[2]] == nil {
				ports[m[2]] = map[string]bool{}
			}
			ports[m[2]][m[3]] = true
			ranks[m[2]]++
		}
	}
	return ports, ranks
}

// TestSPMDRestartTorch: with max_restarts = 1 rank 1's failure stops
// the others and starts all 4 again, with a new MASTER_PORT and
// TORCHELASTIC_RESTART_COUNT=1; the second attempt all-reduces and the
// job succeeds; its output and monarch status show the restart.
func TestSPMDRestartTorch(t *testing.T) {
	python, script := requireTorch(t)
	marker := filepath.Join(t.TempDir(), "failed-once")
	start := time.Now()
	out, stderr, code := localMonarch(t, 3*time.Minute, []string{"FAIL_RANK=1", "FAIL_ONCE=" + marker}, "local", restartJob(t, python, script, 1))
	if code != 0 {
		t.Fatalf("exit %d, want 0 after the restart\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	total := time.Since(start)
	restart := regexp.MustCompile(`(?m)^monarch: rank 1 on h0 failed: exited with status 1 \(\{hosts: 0, gpus: 1\}\); restarting all 4 ranks \(restart 1 of 1\)$`)
	if !restart.MatchString(stderr) || !strings.Contains(stderr, "rank 1 fails on purpose") {
		t.Errorf("no restart line for rank 1 in:\n%s", stderr)
	}
	checkSums(t, out, 4) // the second attempt's: the first never got there
	ports, ranks := attempts(out)
	if ranks["1"] != 4 || len(ports["1"]) != 1 || len(ports["0"]) != 1 {
		t.Errorf("attempts: %v ranks, ports %v; want 4 ranks on restart 1, one port each attempt\n%s", ranks, ports, out)
	}
	for p := range ports["1"] {
		if ports["0"][p] {
			t.Errorf("the restart kept MASTER_PORT %s", p)
		}
	}
	t.Logf("SPMD job of 2 simulated hosts x 2 procs with one gang restart: %v in all", total.Round(time.Millisecond))
	checkNothingLeft(t, script)

	m := regexp.MustCompile(`monarch: job (\S+):`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no job id in:\n%s", stderr)
	}
	status, serr, code := localMonarch(t, time.Minute, nil, "status")
	if code != 0 || !regexp.MustCompile(m[1]+` +done \(1 restart\) `).MatchString(status) {
		t.Errorf("monarch status: exit %d, want the job done (1 restart):\n%s%s", code, status, serr)
	}
	status, serr, code = localMonarch(t, time.Minute, nil, "status", m[1])
	if code != 0 || !strings.Contains(status, "restarts:    1 of at most 1 (every rank started again after one failed or a host was lost)") ||
		!regexp.MustCompile(`(?m)^ +restart 1 at \d\d:\d\d:\d\d: rank 1 on h0 exited with status 1$`).MatchString(status) {
		t.Errorf("monarch status %s: exit %d, want the restart:\n%s%s", m[1], code, status, serr)
	}
}

// TestSPMDNoRestartTorch: the same job with --max-restarts 0 (overriding
// nothing: 0 is the default) fails with rank 1's status, not restarted.
func TestSPMDNoRestartTorch(t *testing.T) {
	python, script := requireTorch(t)
	marker := filepath.Join(t.TempDir(), "failed-once")
	out, stderr, code := localMonarch(t, 3*time.Minute, []string{"FAIL_RANK=1", "FAIL_ONCE=" + marker},
		"local", "--hosts", "2", "--procs", "gpus=2", "--max-restarts", "0", "--", python, script)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (rank 1's status)\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if strings.Contains(stderr, "restarting") || !strings.Contains(stderr, "monarch: rank 1 on h0 failed: exited with status 1 ({hosts: 0, gpus: 1}); the other 3 ranks were stopped\n") {
		t.Errorf("want rank 1's failure, no restart:\n%s", stderr)
	}
	if _, ranks := attempts(out); ranks["1"] != 0 {
		t.Errorf("a second attempt ran:\n%s", out)
	}
	checkNothingLeft(t, script)
}

// TestSPMDRestartsExhausted: a rank that fails every time is restarted
// max_restarts times (--max-restarts overrides the job file), then the
// job fails with the last attempt's status.
func TestSPMDRestartsExhausted(t *testing.T) {
	dir := t.TempDir()
	job := testenv.WriteFile(t, dir, "job.toml", "[spmd]\ncommand = [\"sh\", \"-c\", 'echo \"rank $RANK attempt $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS port $MASTER_PORT\"; [ \"$RANK\" = 1 ] && exit $((5 + TORCHELASTIC_RESTART_COUNT)); sleep 30.17']\nmax_restarts = 5\n\n[procs]\ngpus = 2\n")
	start := time.Now()
	out, stderr, code := localMonarch(t, 2*time.Minute, nil, "local", job, "--max-restarts", "2")
	if code != 7 {
		t.Fatalf("exit %d, want 7 (the last attempt's)\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	t.Logf("3 attempts of 2 ranks, each ended by rank 1's failure: %v", time.Since(start).Round(time.Millisecond))
	for i, want := range []string{
		"; restarting all 2 ranks (restart 1 of 2)",
		"; restarting all 2 ranks (restart 2 of 2)",
		"failed: exited with status 7 ({hosts: 0, gpus: 1}); the other rank was stopped (after 2 restarts)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("line %d: no %q in:\n%s", i, want, stderr)
		}
	}
	for a := range 3 {
		if !strings.Contains(out, fmt.Sprintf("rank 1 attempt %d of 2 port", a)) {
			t.Errorf("no attempt %d of rank 1:\n%s", a, out)
		}
	}
	// An argument no other program on the machine is likely to run
	// with: the check looks at every process.
	checkNothingLeft(t, "sleep 30.17")
}

// TestSPMDMaxRestartsBad: max_restarts below zero is refused at its
// file and line, by config check and by a run, which starts nothing;
// --max-restarts below zero, or for a program that is no SPMD job, is a
// usage error.
func TestSPMDMaxRestartsBad(t *testing.T) {
	dir := t.TempDir()
	job := testenv.WriteFile(t, dir, "job.toml", "[spmd]\ncommand = [\"true\"]\nmax_restarts = -1\n")
	checkRefused(t, job, job+":3: spmd.max_restarts: want 0 or more (how many times every rank starts again when one fails), got -1")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"local", "--procs", "gpus=2", "--max-restarts", "-1", "--", "true"}, "--max-restarts -1: want 0 or more"},
		{[]string{"local", "--max-restarts", "1", "--", "true"}, "--max-restarts restarts the ranks of an SPMD job: give --procs, or a job file with [spmd]"},
	} {
		_, stderr, code := localMonarch(t, time.Minute, nil, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("monarch %s: exit %d, want 2 and %q:\n%s", strings.Join(tt.args, " "), code, tt.want, stderr)
		}
	}
}

// checkRefused checks that config check, monarch local and monarch run
// refuse job, saying want.
func checkRefused(t *testing.T, job, want string) {
	t.Helper()
	for _, args := range [][]string{{"config", "check", job}, {"local", job}, {"run", job}} {
		out, stderr, code := localMonarch(t, time.Minute, nil, args...)
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("monarch %s: exit %d, want the error\n%s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, stderr)
		}
	}
}
