package systest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// descendantsOf lists the pids of pid's children, their children, and so
// on.
func descendantsOf(pid int) []int {
	var all []int
	for _, c := range childrenOf(pid) {
		all = append(append(all, c), descendantsOf(c)...)
	}
	return all
}

// TestAgentKilledLeavesNothing: a host agent SIGKILLed takes along not
// only its procs (their parent-death signal) but what they started in
// their process groups: each rank's shell has a sleep of its own, which
// its keeper ends within a bounded wait; the keeper exits too. The job
// ends, and nothing of it is left.
func TestAgentKilledLeavesNothing(t *testing.T) {
	const sleep = "sleep 47.13"
	agentKilledLeavesNothing(t, nil, sleep, "", "local", "--hosts", "2", "--procs", "gpus=2", "--", "sh", "-c", sleep+" & wait")
}

// TestClusterAgentKilledLeavesNothing: the same on the test cluster's
// two hosts, over ssh and over Slurm (where srun then ends the whole
// step: h1's agent goes too, its keeper ending its groups as well).
func TestClusterAgentKilledLeavesNothing(t *testing.T) {
	c := testcluster.Get(t)
	schedulers := map[string]string{
		"ssh":   fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig),
		"slurm": slurmHosts(2),
	}
	for i, sched := range []string{"ssh", "slurm"} {
		t.Run(sched, func(t *testing.T) {
			dir, sleep := t.TempDir(), fmt.Sprintf("sleep 47.2%d", i)
			testenv.WriteFile(t, dir, "hosts.toml", schedulers[sched])
			job := testenv.WriteFile(t, dir, "job.toml", "hosts = \"hosts.toml\"\n\n[spmd]\ncommand = [\"sh\", \"-c\", '"+sleep+" & wait']\n\n[procs]\ngpus = 2\n")
			node := ""
			if sched == "slurm" {
				node = c.Hosts[1]
			}
			agentKilledLeavesNothing(t, c.Env, sleep, node, "run", job)
		})
	}
}

// agentKilledLeavesNothing runs monarch with args in env (2 hosts x 2
// ranks, each sh -c 'SLEEP & wait'; sleep's argument unique to the test),
// SIGKILLs the second host's agent (under Slurm: node's) once its ranks'
// sleeps run, and checks
// that they and its keeper are gone within 10 s, and, once the job has
// ended, that nothing of it is left.
func agentKilledLeavesNothing(t *testing.T, env []string, sleep, node string, args ...string) {
	t.Helper()
	cmd, _, stderr := startMonarch(t, env, args...)
	t.Cleanup(func() { // what a failure left
		for _, p := range sleeping(sleep) {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	var agent, keeper int
	var sleeps []int
	found := func() bool {
		agent, keeper, sleeps = secondAgent(t, node), 0, nil
		for _, pid := range descendantsOf(agent) {
			switch {
			case cmdlineOf(pid) == sleep:
				sleeps = append(sleeps, pid)
			case isKeeper(pid) && slices.Contains(childrenOf(agent), pid):
				keeper = pid
			}
		}
		return agent != 0 && len(sleeps) == 2
	}
	if !waitFor(time.Minute, found) {
		t.Fatalf("the second host's agent %d: sleeps %v after a minute, want 2; stderr:\n%s", agent, sleeps, stderr)
	}
	if keeper == 0 {
		t.Errorf("the second host's agent %d has no keeper", agent)
	}

	syscall.Kill(agent, syscall.SIGKILL)
	for _, pid := range append(sleeps, keeper) {
		if pid == 0 {
			continue
		}
		if !waitFor(10*time.Second, func() bool { return !alive(pid) }) {
			t.Errorf("%d (%s) still running 10s after the second host's agent was SIGKILLed", pid, cmdlineOf(pid))
		}
	}
	waitExit(t, cmd, 2*time.Minute, stderr)
	var left []testcluster.Proc
	if !waitFor(10*time.Second, func() bool { left = sleeping(sleep); return len(left) == 0 }) {
		t.Errorf("still running 10s after the job ended: %v", left)
	}
	checkNothingLeft(t, sleep)
}

// secondAgent is the pid of the agent of this run's job's second host
// (--index 1, or, under Slurm, the agent on node; the process itself,
// not an ssh session or srun holding it); 0 while there is none.
func secondAgent(t *testing.T, node string) int {
	for _, p := range ourProcs("monarch agent") {
		if !runs(t, p.Cmdline, filepath.Join(build(t), "monarch")) || !strings.Contains(p.Cmdline, " agent ") {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		if node == "" && strings.Contains(p.Cmdline, " --index 1 ") || node != "" && strings.Contains("\x00"+string(env), "\x00SLURMD_NODENAME="+node+"\x00") {
			return p.PID
		}
	}
	return 0
}

// sleeping lists the processes whose command line is exactly cmdline:
// the ranks' sleeps, whose unique argument names them, not the shells,
// agents and launcher whose command lines hold it too.
func sleeping(cmdline string) []testcluster.Proc {
	var procs []testcluster.Proc
	for _, p := range testcluster.Procs(cmdline) {
		if p.Cmdline == cmdline {
			procs = append(procs, p)
		}
	}
	return procs
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// cmdlineOf is pid's command line, its arguments joined by spaces.
func cmdlineOf(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// isKeeper reports whether pid is a host agent's keeper (child.Keeper),
// a child of the agent that is none of its procs.
func isKeeper(pid int) bool { return cmdlineOf(pid) == "monarch-keeper" }
