package systest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/logagg"
)

// The checks that a job left nothing running, and the picks of a job's
// agent to kill, look at this run's processes only: other jobs may run on
// the machine meanwhile (a user's, another test binary's), with agents of
// the same name and even the same program. Every job id of the run starts
// with testenv's MONARCH_JOB_PREFIX, and a job's processes carry their
// job's id: agents on their command line (--job), procs in their
// environment (MONARCH_JOB); what the test starts here inherits the
// prefix itself.

// ours reports whether p belongs to this run: its command line or its
// environment holds the run's job-id prefix.
func ours(p testcluster.Proc) bool {
	prefix := os.Getenv(jobstate.EnvIDPrefix)
	if prefix == "" {
		return true // no run to tell apart (testenv.Setup did nothing): every process counts
	}
	if strings.Contains(p.Cmdline, prefix) {
		return true
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
	return err == nil && strings.Contains(string(env), prefix)
}

// ourProcs lists this run's running processes whose command line holds
// substr (testcluster.Procs less those of other jobs).
func ourProcs(substr string) []testcluster.Proc {
	var procs []testcluster.Proc
	for _, p := range testcluster.Procs(substr) {
		if ours(p) {
			procs = append(procs, p)
		}
	}
	return procs
}

// waitNoneOurs polls ourProcs(substr) until it is empty or d has passed,
// and returns what is still running.
func waitNoneOurs(substr string, d time.Duration) []testcluster.Proc {
	var procs []testcluster.Proc
	waitFor(d, func() bool { procs = ourProcs(substr); return len(procs) == 0 })
	return procs
}

// leftOf lists what of this run's jobs still runs after d: host agents,
// or procs whose command line holds program (an SPMD command's words), or
// that run it (a file: from its path, or from a host's cached copy).
func leftOf(t testing.TB, program string, d time.Duration) []testcluster.Proc {
	t.Helper()
	subs := []string{"monarch agent", program}
	if _, err := os.Stat(program); err == nil {
		subs = append(subs, cachedAs(t, program))
	}
	var left []testcluster.Proc
	seen := map[int]bool{}
	for _, sub := range subs {
		for _, p := range waitNoneOurs(sub, d) {
			if !seen[p.PID] {
				seen[p.PID] = true
				left = append(left, p)
			}
		}
	}
	return left
}

// checkNothingLeft fails if a process of the test's job is still running
// 10 s after it ended (see leftOf).
func checkNothingLeft(t *testing.T, program string) {
	t.Helper()
	if left := leftOf(t, program, 10*time.Second); len(left) > 0 {
		t.Errorf("still running 10s after the job ended: %v", left)
	}
}

// startHeldDetached starts a held job (2 local hosts x 2 procs) with
// monarch run --detach, in env (added to this process's) with a state dir
// of its own, and waits until
// its trainers hold; it returns the job's id and what stops the job
// (once, and at the test's end if not before).
func startHeldDetached(t *testing.T, env []string) (id string, stop func()) {
	t.Helper()
	state := t.TempDir()
	env = append(append(os.Environ(), "MONARCH_STATE_DIR="+state), env...)
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n")
	job := testenv.WriteFile(t, dir, "job.toml", holdLines(t)+"hosts = \"hosts.toml\"\n[procs]\ngpus = 2\n")
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(build(t), "monarch"), args...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("monarch %v: %v\n%s", args, err, stderr.String())
		}
		return string(out), nil
	}
	out, err := run("run", "--detach", job)
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(out)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if _, err := run("stop", id); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	waitUntil(t, time.Minute, "job "+id+"'s trainers to hold", func() bool {
		b, _ := os.ReadFile(filepath.Join(state, id+".out"))
		return strings.Contains(string(b), "holding the trainers")
	})
	return id, stop
}

// TestNothingLeftOnlyOurs: a job of someone else's (no job-id prefix,
// a HOME and state dir of its own) holding agents and procs of the very
// program a test ran is not named by checkNothingLeft; this run's own
// held job is, until it is stopped.
func TestNothingLeftOnlyOurs(t *testing.T) {
	program := filepath.Join(build(t), "multihost")
	home := t.TempDir()
	other, _ := startHeldDetached(t, []string{jobstate.EnvIDPrefix + "=", "HOME=" + home, logagg.EnvSystemLogDir + "=" + filepath.Join(home, "logs")})
	if others := testcluster.Procs(" agent --job " + other + " "); len(others) != 2 {
		t.Fatalf("the other job's agents: %v", others)
	}
	if left := leftOf(t, program, 0); len(left) > 0 {
		t.Errorf("checkNothingLeft would name another job's processes: %v", left)
	}

	own, stopOwn := startHeldDetached(t, nil)
	left := leftOf(t, program, 0)
	var agents int
	for _, p := range left {
		if strings.Contains(p.Cmdline, other) {
			t.Errorf("names the other job's %v", p)
		}
		if strings.Contains(p.Cmdline, " agent --job "+own+" ") {
			agents++
		}
	}
	if agents != 2 || len(left) < 2+4 {
		t.Errorf("of this run's held job %s, checkNothingLeft would name %v: want its 2 agents and 4 procs", own, left)
	}
	stopOwn()
	checkNothingLeft(t, program)
}
