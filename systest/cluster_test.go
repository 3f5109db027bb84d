package systest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The multi-host tests run the real thing: monarch run on a Slurm 22.05
// cluster and over sshd, with two hosts (h1, h2) in network namespaces of
// this machine, started by testdata/cluster/start.sh. Where that cannot
// run they skip, with the reason; MONARCH_REQUIRE_CLUSTER=1 (CI) turns the
// skip into a failure.

// clusterJob writes a job file for program with the given hosts file
// content, in a fresh dir, and returns the job path.
func clusterJob(t *testing.T, program, hosts string, procs string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	return testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nhosts = \"hosts.toml\"\n\n[procs]\n%s\n", program, procs))
}

// heldJob writes a held job (see holdArgs) on hosts, with procs.
func heldJob(t *testing.T, hosts string, procs string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	return testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("%shosts = \"hosts.toml\"\n\n[procs]\n%s\n", holdLines(t), procs))
}

// runMonarch runs monarch with a bound, in env, and returns its output.
func runMonarch(t *testing.T, c *testcluster.Cluster, d time.Duration, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runOnCluster(t, c, d, env, append([]string{filepath.Join(build(t), "monarch")}, args...)...)
}

// runOnCluster runs argv (monarch, or a command that runs it: salloc) with
// a bound, in the cluster's environment and env, with the test's state
// dir, and returns its output and exit status.
func runOnCluster(t *testing.T, c *testcluster.Cluster, d time.Duration, env []string, argv ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(append(os.Environ(), c.Env...), "MONARCH_STATE_DIR="+stateDir(t)), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish within %v\nstdout:\n%s\nstderr:\n%s", argv, d, stdout.String(), stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

var stateDirs = map[*testing.T]string{}

func stateDir(t *testing.T) string {
	if d, ok := stateDirs[t]; ok {
		return d
	}
	d := t.TempDir()
	stateDirs[t] = d
	return d
}

// cachedAs is how a host's cached copy of the binary at path here shows
// in a command line: <cache>/<sha256>/<name> (bincache.Entry), whatever
// the cache.
func cachedAs(t testing.TB, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprint(path, fi.Size(), fi.ModTime().UnixNano())
	if s, ok := cachedNames.Load(key); ok {
		return s.(string)
	}
	b, err := bincache.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := "/" + b.Sum + "/" + b.Name
	cachedNames.Store(key, s)
	return s
}

// cachedNames are cachedAs's answers, by path, size and time: hashing a
// binary takes a while.
var cachedNames sync.Map

// runs says whether cmdline's first word is the binary at path here: at
// that path, or a host's cached copy of it.
func runs(t testing.TB, cmdline, path string) bool {
	argv0, _, _ := strings.Cut(cmdline, " ")
	return argv0 == path || strings.HasSuffix(argv0, cachedAs(t, path))
}

// stepOn finds the host and pid in a line of the multihost example.
var stepOn = regexp.MustCompile(`taking a step on (\S+) \(pid (\d+)\)`)

var trainerLine = regexp.MustCompile(`^\{hosts: (\d), gpus: (\d)\}: Trainer \{hosts: \d, gpus: \d\} taking a step on (\S+) \(pid \d+\) \[RANK=(\d+) LOCAL_RANK=(\d+) WORLD_SIZE=(\d+) LOCAL_WORLD_SIZE=(\d+) MASTER_ADDR=(\S*) MASTER_PORT=(\d+) CUDA_VISIBLE_DEVICES=(\d*)\]$`)

// checkTrainers checks the multihost example's output: 2 hosts x 4 procs,
// on h1 and h2, with consistent torchrun variables; MASTER_ADDR is h1's
// address, where its agent found MASTER_PORT free.
func checkTrainers(t *testing.T, c *testcluster.Cluster, out string) {
	t.Helper()
	if !strings.Contains(out, "Host mesh extent: {hosts: 2}") || !strings.Contains(out, "Process mesh extent: {hosts: 2, gpus: 4}") {
		t.Fatalf("extents missing:\n%s", out)
	}
	var lines []string
	ports := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		m := trainerLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lines = append(lines, line)
		host, gpu := m[1], m[2]
		want := map[string]string{
			"host": "h" + string(rune('1'+host[0]-'0')), "RANK": fmt.Sprint(int(host[0]-'0')*4 + int(gpu[0]-'0')),
			"LOCAL_RANK": gpu, "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": c.Addrs[0], "CUDA": gpu,
		}
		got := map[string]string{"host": m[3], "RANK": m[4], "LOCAL_RANK": m[5], "WORLD_SIZE": m[6], "LOCAL_WORLD_SIZE": m[7], "MASTER_ADDR": m[8], "CUDA": m[10]}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", line, k, got[k], v)
			}
		}
		ports[m[9]] = true
	}
	if len(lines) != 8 {
		t.Fatalf("%d trainer lines, want 8:\n%s", len(lines), out)
	}
	if len(ports) != 1 {
		t.Errorf("MASTER_PORT differs between procs: %v", ports)
	}
}

func TestSlurmRun(t *testing.T) {
	c := testcluster.Get(t)
	bin := build(t)
	program := filepath.Join(bin, "multihost")
	job := clusterJob(t, program, fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\ntime = \"00:05:00\"\n", c.Partition), "gpus = 4")
	start := time.Now()
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", job)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	t.Logf("monarch run on 2 Slurm hosts x 4 procs: %v", time.Since(start).Round(time.Millisecond))
	checkTrainers(t, c, out)
	if !strings.Contains(stderr, "hosts up 2/2") {
		t.Errorf("no progress lines on stderr:\n%s", stderr)
	}
	checkNothingLeft(t, program)
}

func TestSSHRun(t *testing.T) {
	c := testcluster.Get(t)
	bin := build(t)
	program := filepath.Join(bin, "multihost")
	job := clusterJob(t, program, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig), "gpus = 4")
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", job)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	checkTrainers(t, c, out)
	checkNothingLeft(t, program)
}

// TestSlurmRefuses: requests Slurm refuses come back at once, in Slurm's
// own words, with nothing left behind.
func TestSlurmRefuses(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	for _, tt := range []struct{ name, slurm, want string }{
		{"bad partition", "nodes = 2\npartition = \"nosuch\"", "invalid partition"},
		{"impossible request", "nodes = 3", "hosts.toml:3: partition debug has 2 nodes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := clusterJob(t, program, "scheduler = \"slurm\"\n[slurm]\n"+tt.slurm+"\n", "gpus = 1")
			start := time.Now()
			_, stderr, code := runMonarch(t, c, time.Minute, nil, "run", job)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("the error took %v", took)
			}
			t.Logf("%s: exit %d after %v: %s", tt.name, code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr))
			checkNothingLeft(t, program)
		})
	}
}

func TestSSHUnreachableHost(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	// 10.213.7.99 is on the test subnet but nobody has it: ssh times out.
	job := clusterJob(t, program, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, \"10.213.7.99\"]\nconfig_file = %q\nconnect_timeout = \"2s\"\n", c.Hosts[0], c.SSHConfig), "gpus = 1")
	start := time.Now()
	_, stderr, code := runMonarch(t, c, time.Minute, nil, "run", job)
	if code != 1 || !strings.Contains(stderr, "ssh 10.213.7.99 exited with status 255") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	t.Logf("unreachable ssh host: exit %d after %v", code, time.Since(start).Round(time.Millisecond))
	checkNothingLeft(t, program)
}

// startHeld starts monarch run of a held job and returns once it holds,
// with its procs as host/pid.
func startHeld(t *testing.T, c *testcluster.Cluster, job string) (*exec.Cmd, *strings.Builder, []string) {
	t.Helper()
	cmd, stderr, out := startRun(t, c, job)
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var procs []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && !isHolding(sc.Text()) {
		if m := stepOn.FindStringSubmatch(sc.Text()); m != nil {
			procs = append(procs, m[1]+"/"+m[2])
		}
	}
	if len(procs) == 0 {
		t.Fatalf("held job did not start; stderr:\n%s", stderr.String())
	}
	go func() { // keep draining
		for sc.Scan() {
		}
	}()
	sort.Strings(procs)
	return cmd, stderr, procs
}

// startRun starts monarch run of job, killed when the test ends, and
// returns its stdout to read.
func startRun(t *testing.T, c *testcluster.Cluster, job string) (*exec.Cmd, *strings.Builder, io.Reader) {
	t.Helper()
	cmd := exec.Command(filepath.Join(build(t), "monarch"), "run", job)
	cmd.Env = append(append(os.Environ(), c.Env...), "MONARCH_STATE_DIR="+stateDir(t))
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
	return cmd, stderr, out
}

// TestKilledAgent kills one host agent of a running job: the client
// reports the lost host and exits 1, and nothing of the job is left.
func TestKilledAgent(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := heldJob(t, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig), "gpus = 2")
	cmd, stderr, procs := startHeld(t, c, job)
	if len(procs) != 4 {
		t.Fatalf("procs %v", procs)
	}
	var agents []testcluster.Proc
	for _, p := range ourProcs("monarch agent") {
		if runs(t, p.Cmdline, filepath.Join(build(t), "monarch")) && strings.Contains(p.Cmdline, " agent ") {
			agents = append(agents, p) // the agent itself, not the ssh session holding it
		}
	}
	if len(agents) != 2 {
		t.Fatalf("agents running: %v", agents)
	}
	start := time.Now()
	syscall.Kill(agents[1].PID, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "unhandled failure") {
			t.Fatalf("monarch run ended with %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("job still running 30s after an agent was killed; stderr:\n%s", stderr.String())
	}
	t.Logf("killed agent: job failed %v later", time.Since(start).Round(time.Millisecond))
	checkNothingLeft(t, program)
	t.Logf("killed agent: nothing left %v later", time.Since(start).Round(time.Millisecond))
}

// TestDetachStatusStop submits a job with --detach, sees it in status,
// stops it, and sees it stopped with nothing left.
func TestDetachStatusStop(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := heldJob(t, fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\n", c.Partition), "gpus = 1")
	id, sid := detachSlurm(t, c, job)
	// The batch job's monarch run takes over the record; one row. The
	// stop below is of a program that runs: its 2 procs are up (a stop
	// before that is "stopped by monarch stop before it ran").
	status := waitSlurmStatus(t, c, id, "running")
	waitSlurmProcs(t, c, id, 2)
	if strings.Count(status, "\n") != 3 || !strings.Contains(status, "slurm "+sid) {
		t.Errorf("status has more rows than the job, or not its Slurm job id %s:\n%s", sid, status)
	}
	// Slurm's id works too.
	for _, args := range [][]string{{"status", sid}, {"logs", sid}} {
		if out, stderr, code := runMonarch(t, c, 30*time.Second, nil, args...); code != 0 || !strings.Contains(out, id) && args[0] == "status" {
			t.Errorf("monarch %v: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	out, stderr, code := runMonarch(t, c, time.Minute, nil, "stop", id)
	if code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	// The batch job's monarch run ends it on a compute node: stop has
	// asked Slurm, and says so (or how it ended, if it already has).
	asked := regexp.MustCompile(`^(asked slurm to stop job ` + id + ` \(batch job ` + sid + `\); monarch status ` + id + ` shows how it ends|stopped job ` + id + `: 2 procs ended, .*)\n$`)
	if !asked.MatchString(out) {
		t.Errorf("stop: stdout %q, want it to match %s", out, asked)
	}
	waitSlurmStatus(t, c, id, "stopped by monarch stop")
	checkNothingLeft(t, program)
}

// detachSlurm submits job with monarch run --detach and returns the id it
// printed and the Slurm job's (from monarch status ID).
func detachSlurm(t *testing.T, c *testcluster.Cluster, job string, args ...string) (id, slurmID string) {
	t.Helper()
	out, stderr, code := runMonarch(t, c, time.Minute, nil, append([]string{"run", "--detach", job}, args...)...)
	id = strings.TrimSpace(out)
	if code != 0 || !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(id) {
		t.Fatalf("--detach: exit %d, stdout %q (want the job's id alone)\n%s", code, out, stderr)
	}
	m := regexp.MustCompile(`submitted \(Slurm job (\d+)\)`).FindStringSubmatch(stderr)
	if m == nil || !strings.Contains(stderr, "monarch logs -f "+id) {
		t.Fatalf("--detach does not say the Slurm job id and what to do next:\n%s", stderr)
	}
	t.Cleanup(func() { c.Command(context.Background(), "scancel", m[1]).Run() })
	return id, m[1]
}

// waitSlurmStatus polls monarch status (bounded: other tests' jobs may
// hold the nodes a while) until job's row says state; it returns the
// listing.
func waitSlurmStatus(t *testing.T, c *testcluster.Cluster, job, state string) string {
	t.Helper()
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(job) + `\s+` + regexp.QuoteMeta(state) + `\s\s`)
	var status string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		status, _, _ = runMonarch(t, c, 30*time.Second, nil, "status")
		if row.MatchString(status) {
			return status
		}
	}
	t.Fatalf("status never showed %s %q:\n%s", job, state, status)
	return ""
}

// waitSlurmProcs waits (at most 3 minutes) until monarch status shows
// the running Slurm job with n procs up.
func waitSlurmProcs(t *testing.T, c *testcluster.Cluster, job string, n int) {
	t.Helper()
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(job) + `\s+running\s+slurm \d+\s+\d+\s+` + strconv.Itoa(n) + `\s`)
	var status string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		status, _, _ = runMonarch(t, c, 30*time.Second, nil, "status")
		if row.MatchString(status) {
			return
		}
	}
	t.Fatalf("status never showed %s running with %d procs:\n%s", job, n, status)
}

// TestCtrlCRun: SIGINT to monarch run tears the whole job down (client,
// ssh sessions, agents, procs) and exits 130.
func TestCtrlCRun(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := heldJob(t, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig), "gpus = 2")
	cmd, stderr, _ := startHeld(t, c, job)
	start := time.Now()
	interruptWait(t, cmd, stderr, 15*time.Second)
	checkNothingLeft(t, program)
	t.Logf("Ctrl-C: job torn down in %v", time.Since(start).Round(time.Millisecond))
}

// interruptWait sends SIGINT to a started monarch and waits (at most d)
// for it to exit with status 130.
func interruptWait(t *testing.T, cmd *exec.Cmd, stderr fmt.Stringer, d time.Duration) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("%v ended with %v, want exit status 130; stderr:\n%s", cmd.Args[:2], err, stderr.String())
		}
	case <-time.After(d):
		t.Fatalf("%v still running %v after SIGINT", cmd.Args[:2], d)
	}
}

// startCut starts monarch run of the cut program with args over ssh on
// h1 and h2, and returns once its stream of messages is going, with its
// stdout lines to come.
func startCut(t *testing.T, c *testcluster.Cluster, args ...string) (*exec.Cmd, *strings.Builder, <-chan string) {
	t.Helper()
	program := filepath.Join(build(t), "cut")
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig))
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [%s]\nhosts = \"hosts.toml\"\n", program, strings.Join(quoted, ", ")))
	cmd, stderr, out := startRun(t, c, job)
	lines := make(chan string, 64)
	sc := bufio.NewScanner(out)
	go func() {
		defer close(lines)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the job ended before its stream started; stderr:\n%s", stderr.String())
			}
			if l == "TRAFFIC" {
				return cmd, stderr, lines
			}
		case <-timeout:
			t.Fatalf("no stream within 2 minutes; stderr:\n%s", stderr.String())
		}
	}
}

// waitCut waits (bounded) for the job to end and returns its stdout lines
// and exit code.
func waitCut(t *testing.T, cmd *exec.Cmd, stderr *strings.Builder, lines <-chan string) ([]string, int) {
	t.Helper()
	var out []string
	timeout := time.After(3 * time.Minute)
	for open := true; open; {
		select {
		case l, ok := <-lines:
			if ok {
				out = append(out, l)
			}
			open = ok
		case <-timeout:
			t.Fatalf("job still running 3 minutes after the cut; stdout so far %q; stderr:\n%s", out, stderr.String())
		}
	}
	code := 0
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return out, code
}

// TestLinkCutMidTraffic cuts h2's link (eth0 down in its namespace) for 2s
// while broadcasts and calls stream to the procs on both hosts (through
// h2's leaf node): the job goes on, and every member counts every
// broadcast exactly once.
func TestLinkCutMidTraffic(t *testing.T) {
	c := testcluster.GetCutter(t)
	cmd, stderr, lines := startCut(t, c, "-for", "6s")
	time.Sleep(time.Second)
	c.CutLink(t, c.Hosts[1], 2*time.Second)
	out, code := waitCut(t, cmd, stderr, lines)
	joined := strings.Join(out, "\n")
	if code != 0 || !strings.Contains(joined, "COUNTED ") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, joined, stderr.String())
	}
	t.Logf("h2 cut for 2s mid-stream: %s", strings.Join(out, "; "))
	// The cut was mid-stream: a call waited for the link to come back.
	if ms := longestCall(out); ms < 1500 {
		t.Errorf("the longest call took %dms: the cut held nothing up", ms)
	}
	checkNothingLeft(t, filepath.Join(build(t), "cut"))
}

// longestCall is the cut program's LONGEST line, in ms; -1 if none.
func longestCall(out []string) int {
	for _, l := range out {
		if v, ok := strings.CutPrefix(l, "LONGEST "); ok {
			if ms, err := strconv.Atoi(v); err == nil {
				return ms
			}
		}
	}
	return -1
}

// TestLinkLostPastHostTimeout cuts h2's link for longer than the host
// timeout: h2's procs are reported failed to their owner (its silence
// confirmed by its link to the launcher, which the kernel drops after
// link_timeout without an answer), h1's counted
// every broadcast sent and still answer, nothing hangs, and nothing of
// the job is left running on either host.
func TestLinkLostPastHostTimeout(t *testing.T) {
	c := testcluster.GetCutter(t)
	cmd, stderr, lines := startCut(t, c, "-for", "60s", "-lose")
	time.Sleep(time.Second)
	start := time.Now()
	c.CutLink(t, c.Hosts[1], 12*time.Second)
	out, code := waitCut(t, cmd, stderr, lines)
	joined := strings.Join(out, "\n")
	if !strings.Contains(joined, "SURVIVED ") || !strings.Contains(joined, "failed: {hosts: 1") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, joined, stderr.String())
	}
	// Confirmed by its link, not by a long silence: within the host
	// timeout.
	if !strings.Contains(joined, "its link down: no answer from the agent's host") {
		t.Errorf("h2's loss was not confirmed by its link:\n%s", joined)
	}
	t.Logf("h2 cut for 12s: exit %d %v after the cut; %s", code, time.Since(start).Round(time.Millisecond), strings.Join(out, "; "))
	checkNothingLeft(t, filepath.Join(build(t), "cut"))
}
