package systest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
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
	cmd, _, stderr := startMonarch(t, nil, "local", "--hosts", "2", "--procs", "gpus=2", "--", "sh", "-c", sleep+" & wait")
	ranks := func() (n int) {
		for _, p := range sleeping(sleep) {
			if slices.Contains(descendantsOf(cmd.Process.Pid), p.PID) {
				n++
			}
		}
		return n
	}
	if !waitFor(time.Minute, func() bool { return ranks() == 4 }) {
		t.Fatalf("the 4 ranks' sleeps: %v after a minute; stderr:\n%s", sleeping(sleep), stderr)
	}

	agent := localAgent(t, cmd.Process.Pid, 1)
	var sleeps []int
	keeper := 0
	for _, pid := range descendantsOf(agent) {
		switch {
		case cmdlineOf(pid) == sleep:
			sleeps = append(sleeps, pid)
		case isKeeper(pid) && slices.Contains(childrenOf(agent), pid):
			keeper = pid
		}
	}
	t.Cleanup(func() { // what a failure left
		for _, p := range sleeping(sleep) {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	if len(sleeps) != 2 {
		t.Fatalf("h1's agent %d: sleeps %v, want 2", agent, sleeps)
	}
	if keeper == 0 {
		t.Errorf("h1's agent %d has no keeper", agent)
	}

	syscall.Kill(agent, syscall.SIGKILL)
	for _, pid := range append(sleeps, keeper) {
		if pid == 0 {
			continue
		}
		if !waitFor(10*time.Second, func() bool { return !alive(pid) }) {
			t.Errorf("%d (%s) still running 10s after h1's agent was SIGKILLed", pid, cmdlineOf(pid))
		}
	}
	waitExit(t, cmd, 2*time.Minute, stderr)
	var left []testcluster.Proc
	if !waitFor(10*time.Second, func() bool { left = sleeping(sleep); return len(left) == 0 }) {
		t.Errorf("still running 10s after the job ended: %v", left)
	}
	checkNothingLeft(t, sleep)
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
