package systest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
)

// Failures on the test cluster, as a user sees them: a job that ends well
// prints nothing of srun's, and one that fails names the host that failed
// first, its own error, and the hosts file's key that would fix it.

// slurmHosts is a Slurm hosts file: nodes, then more keys of [slurm].
func slurmHosts(nodes int, more ...string) string {
	return fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = %d\n%s", nodes, strings.Join(append(more, ""), "\n"))
}

// schedulerLines are the lines of stderr that srun, slurmstepd or ssh
// wrote themselves.
func schedulerLines(stderr string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "srun:") || strings.HasPrefix(l, "slurmstepd") || strings.HasPrefix(l, "ssh:") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestSlurmQuietSuccess: a 2-host Slurm run that ends well prints no line
// of srun's or slurmstepd's (tearing the step down made srun print half a
// dozen); what they said is in the launcher's system log.
func TestSlurmQuietSuccess(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := clusterJob(t, program, slurmHosts(2, "time = \"00:05:00\""), "gpus = 2")
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", job)
	if code != 0 || !strings.Contains(out, "Process mesh extent: {hosts: 2, gpus: 2}") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if lines := schedulerLines(stderr); len(lines) > 0 {
		t.Errorf("a run that ended well printed srun's lines %q; stderr:\n%s", lines, stderr)
	}
	m := regexp.MustCompile(`monarch: job (\S+) `).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no job id on stderr:\n%s", stderr)
	}
	// srun, stopped at the end, said something: it went to the log.
	logPath := filepath.Join(os.Getenv("MONARCH_SYSLOG_DIR"), "monarch_"+m[1]+"_launcher.log")
	if b, err := os.ReadFile(logPath); err == nil && !strings.Contains(string(b), `"from":"srun"`) {
		t.Errorf("%s has no line of srun's:\n%s", logPath, b)
	}
	checkNothingLeft(t, program)
}

// TestSlurmMissingMonarch: [slurm] monarch names no file on the nodes.
// The message names the path tried, a host, and the key.
func TestSlurmMissingMonarch(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := clusterJob(t, program, slurmHosts(2, `monarch = "/nonexistent/monarch"`), "gpus = 1")
	_, stderr, code := runMonarch(t, c, 2*time.Minute, nil, "run", job)
	want := regexp.MustCompile(`cannot run monarch at /nonexistent/monarch on h[12] \(No such file or directory\): \[slurm\] monarch sets`)
	if code != 1 || !want.MatchString(stderr) {
		t.Fatalf("exit %d, want 1 and %q; stderr:\n%s", code, want, stderr)
	}
	t.Logf("stderr:\n%s", stderr)
	checkNothingLeft(t, program)
}

// TestSSHMissingMonarch: the same over ssh.
func TestSSHMissingMonarch(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\nmonarch = \"/nonexistent/monarch\"\n", c.Hosts[0], c.Hosts[1], c.SSHConfig)
	_, stderr, code := runMonarch(t, c, 2*time.Minute, nil, "run", clusterJob(t, program, hosts, "gpus = 1"))
	want := regexp.MustCompile(`ssh (h[12]) exited with status 127; cannot run monarch at /nonexistent/monarch on (h[12]) \(No such file or directory\): \[ssh\] monarch sets`)
	m := want.FindStringSubmatch(stderr)
	if code != 1 || m == nil || m[1] != m[2] {
		t.Fatalf("exit %d, want 1 and %q; stderr:\n%s", code, want, stderr)
	}
	checkNothingLeft(t, program)
}

// TestSlurmLinkDownNamesHost: h2's link is down as the job starts: srun
// cannot launch h2's agent and tears the step down (h1's agent is killed
// last). The message names h2 and why, not h1.
func TestSlurmLinkDownNamesHost(t *testing.T) {
	c := testcluster.GetCutter(t)
	t.Cleanup(func() { waitNodeResponds(t, c, c.Hosts[1]) })
	program := filepath.Join(build(t), "multihost")
	job := clusterJob(t, program, slurmHosts(2), "gpus = 1")
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		c.CutLink(t, c.Hosts[1], 15*time.Second) // srun gives up on h2 within its 10 s MessageTimeout
	}()
	time.Sleep(500 * time.Millisecond) // the link is down
	_, stderr, code := runMonarch(t, c, 2*time.Minute, nil, "run", job)
	<-cut
	want := "first failing host " + c.Hosts[1] + ": Slurm could not launch its agent: "
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, want 1 and %q; stderr:\n%s", code, want, stderr)
	}
	// The raw lines follow, h2's first.
	said := stderr[strings.Index(stderr, want):]
	if i, j := strings.Index(said, "failed on node "+c.Hosts[1]), strings.Index(said, c.Hosts[0]+": task 0"); i < 0 || (j >= 0 && j < i) {
		t.Errorf("srun's lines do not follow the cause, %s's first:\n%s", c.Hosts[1], stderr)
	}
	t.Logf("stderr:\n%s", stderr)
	checkNothingLeft(t, program)
}

// waitNodeResponds waits (at most 90 s) until Slurm has node back (not
// "*", not responding, nor down), for the tests that follow. A node
// Slurm drained because it could not reach it to end the job's tasks
// ("Kill task failed", the cut's doing) is resumed.
func waitNodeResponds(t *testing.T, c *testcluster.Cluster, node string) {
	var state string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := c.Command(ctx, "sinfo", "-h", "-n", node, "-o", "%T|%E").Output()
		cancel()
		st, reason, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
		state = st
		if strings.HasPrefix(st, "drain") && strings.HasPrefix(reason, "Kill task failed") {
			t.Logf("%s drained by Slurm (%s): resumed", node, reason)
			scontrol(t, c, "update", "nodename="+node, "state=resume")
			continue
		}
		if err == nil && st != "" && !strings.HasSuffix(st, "*") && !strings.HasPrefix(st, "down") {
			return
		}
	}
	t.Errorf("node %s still %q 90s after its link came back", node, state)
}

// TestSlurmKilledAgentNamesHost kills h2's agent of a running Slurm job:
// h2's task is reported alone, naming h2 (h1's agent goes on until the
// job, its proc mesh failed, ends), and the client names hosts by their
// names, never an agent's id as if it were one.
func TestSlurmKilledAgentNamesHost(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := heldJob(t, slurmHosts(2, "time = \"00:05:00\""), "gpus = 1")
	cmd, stderr, _ := startHeld(t, c, job)
	pid := agentOn(t, c.Hosts[1])
	syscall.Kill(pid, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("job still running 60s after an agent was killed; stderr:\n%s", stderr.String())
	}
	got := stderr.String()
	if !strings.Contains(got, "srun task on "+c.Hosts[1]+" ended; its agent was killed") {
		t.Errorf("the end does not name %s first; stderr:\n%s", c.Hosts[1], got)
	}
	if m := regexp.MustCompile(`host agent h\d`).FindString(got); m != "" {
		t.Errorf("%q: an agent named by its id; stderr:\n%s", m, got)
	}
	t.Logf("stderr:\n%s", got)
	checkNothingLeft(t, program)
}

// agentOn finds the pid of the job's host agent on host (its Slurm node
// name in its environment).
func agentOn(t *testing.T, host string) int {
	t.Helper()
	for _, p := range ourProcs("monarch agent") {
		if !runs(t, p.Cmdline, filepath.Join(build(t), "monarch")) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		if err == nil && strings.Contains("\x00"+string(env)+"\x00", "\x00SLURMD_NODENAME="+host+"\x00") {
			return p.PID
		}
	}
	t.Fatalf("no host agent of the job on %s: %v", host, ourProcs("monarch agent"))
	return 0
}

// TestSlurmDrainedNode: with h2 drained, 2 nodes cannot be had within
// [slurm] immediate; the message names the key, its value, and h2's state.
func TestSlurmDrainedNode(t *testing.T) {
	c := testcluster.Get(t)
	node := c.Hosts[1]
	scontrol(t, c, "update", "nodename="+node, "state=drain", "reason=monarch-test")
	t.Cleanup(func() { scontrol(t, c, "update", "nodename="+node, "state=resume") })
	program := filepath.Join(build(t), "multihost")
	job := clusterJob(t, program, slurmHosts(2, `immediate = "3s"`), "gpus = 1")
	start := time.Now()
	_, stderr, code := runMonarch(t, c, time.Minute, nil, "run", job)
	for _, want := range []string{`no allocation within \[slurm\] immediate = "3s" in \S*hosts\.toml:4 for \[slurm\] nodes = 2 in \S*hosts\.toml:3`,
		regexp.QuoteMeta(node + ": drained (monarch-test)"), "1 of them can run jobs now", "\n    salloc: error: Unable to allocate resources"} {
		if code != 1 || !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("exit %d, want 1 and %q; stderr:\n%s", code, want, stderr)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %v with [slurm] immediate = 3s", took)
	}
	t.Logf("stderr:\n%s", stderr)
	checkNothingLeft(t, program)
}

// scontrol runs scontrol with args, bounded.
func scontrol(t *testing.T, c *testcluster.Cluster, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := c.Command(ctx, "scontrol", args...).CombinedOutput(); err != nil {
		t.Errorf("scontrol %v: %v: %s", args, err, out)
	}
}

// TestSlurmNodesBeyondPartition: more nodes than the partition has is
// refused before salloc, naming the key, its line and the partition.
func TestSlurmNodesBeyondPartition(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	job := clusterJob(t, program, slurmHosts(3), "gpus = 1")
	_, stderr, code := runMonarch(t, c, time.Minute, nil, "run", job)
	want := regexp.MustCompile(`\[slurm\] nodes = 3 in \S*hosts\.toml:3: partition ` + regexp.QuoteMeta(c.Partition) + ` has 2 nodes \(.*h.*\), time limit \S+`)
	if code != 1 || !want.MatchString(stderr) || strings.Contains(stderr, "salloc:") {
		t.Fatalf("exit %d, want 1 and %q before any salloc; stderr:\n%s", code, want, stderr)
	}
	t.Logf("stderr:\n%s", stderr)
}

// TestSlurmHostsBeyondAllocation: inside `salloc -N1`, a hosts file that
// asks for 2 nodes is an error naming both; one that asks for 1 of
// `salloc -N2` runs on the first, and says so.
func TestSlurmHostsBeyondAllocation(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	monarchBin := filepath.Join(build(t), "monarch")
	_, stderr, code := runOnCluster(t, c, time.Minute, nil, "salloc", "-N1", "--immediate=20", monarchBin, "run", clusterJob(t, program, slurmHosts(2), "gpus = 1"))
	want := regexp.MustCompile(`\[slurm\] nodes = 2 in \S*hosts\.toml:3, but this allocation \(Slurm job \d+\) has 1 node: h[12]\n`)
	if code != 1 || !want.MatchString(stderr) {
		t.Fatalf("exit %d, want 1 and %q; stderr:\n%s", code, want, stderr)
	}
	out, stderr, code := runOnCluster(t, c, 2*time.Minute, nil, "salloc", "-N2", "--immediate=20", monarchBin, "run", clusterJob(t, program, slurmHosts(1), "gpus = 1"))
	want = regexp.MustCompile(`\[slurm\] nodes = 1 in \S*hosts\.toml:3: the job runs on (h[12]), the first 1 of the 2 nodes of this allocation \(Slurm job \d+: h\[1-2\]\)`)
	m := want.FindStringSubmatch(stderr)
	if code != 0 || m == nil || !strings.Contains(out, "taking a step on "+m[1]) || strings.Count(out, "taking a step on") != 1 {
		t.Fatalf("exit %d, want 0 and %q, one proc on that host; stdout:\n%s\nstderr:\n%s", code, want, out, stderr)
	}
	checkNothingLeft(t, program)
}
