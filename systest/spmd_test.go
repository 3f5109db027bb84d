package systest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The SPMD tests run a real PyTorch program (testdata/torch/allreduce.py,
// gloo over TCP) on every proc: locally on simulated hosts, and on the
// test cluster over Slurm and ssh. Debian's python3-torch is installed by
// testdata/torch/setup.sh when missing (root); where it cannot be, they
// skip, or fail under MONARCH_REQUIRE_CLUSTER=1 (testenv.Require).

// requireTorch returns the python that imports torch, and the all-reduce
// script.
func requireTorch(t *testing.T) (python, script string) {
	t.Helper()
	testenv.Require(t, "PyTorch", "testdata/torch/setup.sh")
	script, err := filepath.Abs("testdata/torch/allreduce.py")
	if err != nil {
		t.Fatal(err)
	}
	return "/usr/bin/python3", script
}

var sumLine = regexp.MustCompile(`rank (\d+) of (\d+) on \S+: sum (\d+), expected (\d+)$`)

// checkSums checks that each of world ranks printed the all-reduce's sum.
func checkSums(t *testing.T, out string, world int) {
	t.Helper()
	var ranks []string
	for _, line := range strings.Split(out, "\n") {
		m := sumLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ranks = append(ranks, m[1])
		if m[2] != fmt.Sprint(world) || m[3] != m[4] {
			t.Errorf("%s: want world %d and the expected sum", line, world)
		}
	}
	sort.Strings(ranks)
	if len(ranks) != world {
		t.Errorf("%d ranks printed a sum (%v), want %d:\n%s", len(ranks), ranks, world, out)
	}
}

// localMonarch runs monarch in a temporary state dir, bounded.
func localMonarch(t *testing.T, d time.Duration, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runMonarch(t, &testcluster.Cluster{}, d, env, args...)
}

// TestSPMDLocalTorch: monarch local --procs runs a PyTorch program on
// every proc of 2 simulated hosts; every rank all-reduces.
func TestSPMDLocalTorch(t *testing.T) {
	python, script := requireTorch(t)
	start := time.Now()
	out, stderr, code := localMonarch(t, 2*time.Minute, nil, "local", "--hosts", "2", "--procs", "gpus=2", "--", python, script)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	t.Logf("SPMD job of 2 simulated hosts x 2 procs, all-reduce done: %v", time.Since(start).Round(time.Millisecond))
	checkSums(t, out, 4)
	checkNothingLeft(t, script)
	// The ranks' lines are the job's log, as any proc's.
	m := regexp.MustCompile(`monarch: job (\S+):`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no job id in:\n%s", stderr)
	}
	logs, stderr, code := localMonarch(t, time.Minute, nil, "logs", m[1])
	if code != 0 {
		t.Fatalf("monarch logs %s: exit %d\n%s", m[1], code, stderr)
	}
	checkSums(t, logs, 4)
}

// startedLine is a rank's line of the start-time command.
var startedLine = regexp.MustCompile(`started (\d+)$`)

// allRunning runs a command printing the time each rank starts, and
// returns how long after t0 the last one did.
func allRunning(t *testing.T, out string, t0 time.Time, world int) time.Duration {
	t.Helper()
	var last int64
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if m := startedLine.FindStringSubmatch(line); m != nil {
			ns, _ := strconv.ParseInt(m[1], 10, 64)
			last, n = max(last, ns), n+1
		}
	}
	if n != world {
		t.Fatalf("%d ranks said they started, want %d:\n%s", n, world, out)
	}
	return time.Unix(0, last).Sub(t0)
}

// TestSPMDLocalFailure: one rank raising fails the job with its status,
// naming its rank and host; the others are stopped.
func TestSPMDLocalFailure(t *testing.T) {
	python, script := requireTorch(t)
	out, stderr, code := localMonarch(t, 2*time.Minute, []string{"FAIL_RANK=1"}, "local", "--hosts", "2", "--procs", "gpus=2", "--", python, script)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the raising rank's status)\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "rank 1 fails on purpose") || !strings.Contains(stderr, "monarch: rank 1 on h0 failed: exited with status 1 ({hosts: 0, gpus: 1}); the other 3 ranks were stopped") {
		t.Errorf("the failure does not name rank 1 on h0:\n%s", stderr)
	}
	checkNothingLeft(t, script)
}

// TestSPMDExitStatus: the job exits with the status of the first proc
// that fails; all exiting 0 is 0.
func TestSPMDExitStatus(t *testing.T) {
	out, stderr, code := localMonarch(t, time.Minute, nil, "local", "--procs", "gpus=3", "--", "sh", "-c", `[ "$RANK" = 2 ] && exit 7; exit 0`)
	if code != 7 || !regexp.MustCompile(`monarch: rank 2 on \S+ failed: exited with status 7 \(\{gpus: 2\}\)`).MatchString(stderr) {
		t.Fatalf("exit %d, want 7 from rank 2\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if _, stderr, code := localMonarch(t, time.Minute, nil, "local", "--procs", "gpus=3", "--", "true"); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, stderr)
	}
	_, stderr, code = localMonarch(t, time.Minute, nil, "local", "--procs", "gpus=2", "--", "no-such-command-anywhere")
	if code != 1 || !strings.Contains(stderr, "no-such-command-anywhere") {
		t.Fatalf("a missing command: exit %d, want 1 and its name\n%s", code, stderr)
	}
}

// TestSPMDLocalCtrlC: SIGINT to monarch local stops every proc and exits
// 130.
func TestSPMDLocalCtrlC(t *testing.T) {
	python, script := requireTorch(t)
	cmd := exec.Command(filepath.Join(build(t), "monarch"), "local", "--hosts", "2", "--procs", "gpus=2", "--", python, script)
	cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+stateDir(t), "SLEEP=600")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	go io.Copy(io.Discard, stdout)
	// Wait (bounded) until the 4 ranks run.
	deadline := time.Now().Add(time.Minute)
	ranks := func() (n int) {
		for _, p := range ourProcs(script) {
			if strings.HasPrefix(p.Cmdline, python+" "+script) {
				n++
			}
		}
		return n
	}
	for ranks() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("ranks running: %v\nstderr:\n%s", ourProcs(script), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	interruptWait(t, cmd, &stderr, 30*time.Second)
	checkNothingLeft(t, script)
}

// spmdClusterJob writes an [spmd] job running the all-reduce on 2 procs
// of each of the hosts the hosts file describes, with the [env] table's
// lines env.
func spmdClusterJob(t *testing.T, python, script, hosts, env string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	return testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("hosts = \"hosts.toml\"\n\n[spmd]\ncommand = [%q, %q]\n\n[procs]\ngpus = 2\n\n[env]\n%s\n", python, script, env))
}

// TestSPMDSlurmTorch: monarch run of an [spmd] job on 2 Slurm hosts x 2
// procs: PyTorch's gloo all-reduce across the hosts.
func TestSPMDSlurmTorch(t *testing.T) {
	c := testcluster.Get(t)
	python, script := requireTorch(t)
	hosts := fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\ntime = \"00:05:00\"\n", c.Partition)
	// How soon every rank runs: a command that says when it started.
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	clock := testenv.WriteFile(t, dir, "job.toml", "hosts = \"hosts.toml\"\n[spmd]\ncommand = [\"sh\", \"-c\", \"echo started $(date +%s%N)\"]\n[procs]\ngpus = 2\n")
	t0 := time.Now()
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", clock)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	t.Logf("SPMD job on 2 Slurm hosts x 2 procs: all ranks running %v after monarch run started (salloc, srun, agents, spawn)", allRunning(t, out, t0, 4).Round(time.Millisecond))
	job := spmdClusterJob(t, python, script, hosts, "")
	start := time.Now()
	out, stderr, code = runMonarch(t, c, 3*time.Minute, nil, "run", job)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	t.Logf("SPMD job on 2 Slurm hosts x 2 procs, all-reduce done: %v", time.Since(start).Round(time.Millisecond))
	checkSums(t, out, 4)
	for _, h := range c.Hosts {
		if !strings.Contains(out, " on "+h+": sum") {
			t.Errorf("no rank ran on %s:\n%s", h, out)
		}
	}
	checkNothingLeft(t, script)
}

// TestSPMDSSHTorch: the same over ssh, one rank failing: the job fails
// with its status, naming its rank and host.
func TestSPMDSSHTorch(t *testing.T) {
	c := testcluster.Get(t)
	python, script := requireTorch(t)
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig)
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", spmdClusterJob(t, python, script, hosts, ""))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	checkSums(t, out, 4)
	out, stderr, code = runMonarch(t, c, 3*time.Minute, nil, "run", spmdClusterJob(t, python, script, hosts, `FAIL_RANK = "3"`))
	if code != 1 || !strings.Contains(stderr, "monarch: rank 3 on "+c.Hosts[1]+" failed: exited with status 1 ({hosts: 1, gpus: 1})") {
		t.Fatalf("exit %d, want 1 naming rank 3 on %s\nstdout:\n%s\nstderr:\n%s", code, c.Hosts[1], out, stderr)
	}
	checkNothingLeft(t, script)
}

// TestSPMDStopGrace: SIGTERM to an SPMD job gives its commands SIGTERM
// and the stop grace to exit, longer than the 5 s stop timeout of procs.
func TestSPMDStopGrace(t *testing.T) {
	cmd := exec.Command(filepath.Join(build(t), "monarch"), "local", "--procs", "gpus=2", "--", "sh", "-c",
		`trap 'sleep 6; echo "rank $RANK saved"; exit 0' TERM; echo "rank $RANK ready"; while :; do sleep 0.1; done`)
	cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+stateDir(t))
	var stdout, stderr testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitUntil(t, time.Minute, "both ranks ready", func() bool { return strings.Count(stdout.String(), " ready") == 2 })
	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGTERM; stderr:\n%s", stderr.String())
	}
	t.Logf("SIGTERM to exit, the commands taking 6 s to save: %v", time.Since(t0).Round(time.Millisecond))
	if code := cmd.ProcessState.ExitCode(); code != 143 || strings.Count(stdout.String(), " saved") != 2 {
		t.Errorf("exit %d, want 143 with both ranks saved; stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}
