package systest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/launch"
)

// The job lifecycle: a stop (SIGTERM, monarch stop) gives the program its
// stop grace and Preempted's notice; a time-limit warning (SIGUSR1, or
// the launcher's own timer in a Slurm allocation) is a notice only; a
// requeued Slurm batch job comes back and counts its restarts. The
// program is examples/checkpoint.

// trainRun is a run of the checkpoint example under monarch.
type trainRun struct {
	cmd    *exec.Cmd
	lines  chan string // its stdout, line by line; closed at its end
	stderr *testenv.SyncBuffer
	ckpt   string
}

// startTrain runs monarch with args, then the checkpoint example with
// its checkpoint in dir, and waits (bounded) until it has trained 50
// steps.
func startTrain(t *testing.T, dir string, args ...string) *trainRun {
	t.Helper()
	ckpt := filepath.Join(dir, "c.json")
	argv := append(args, filepath.Join(build(t), "checkpoint"), "-steps", "1000000", "-work", "5ms", "-checkpoint", ckpt)
	cmd := exec.Command(filepath.Join(build(t), "monarch"), argv...)
	cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+stateDir(t))
	r := &trainRun{cmd: cmd, lines: make(chan string, 1024), stderr: &testenv.SyncBuffer{}, ckpt: ckpt}
	cmd.Stderr = r.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	r.waitFor(t, "step 50 ", time.Minute)
	return r
}

// waitFor reads lines until one starts with prefix, and returns it.
func (r *trainRun) waitFor(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("ended before a line %q; stderr:\n%s", prefix, r.stderr.String())
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line %q within %v; stderr:\n%s", prefix, d, r.stderr.String())
		}
	}
}

// finish waits (bounded) for the rest of the output and the exit status.
func (r *trainRun) finish(t *testing.T, d time.Duration) (rest []string, code int) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case line, ok := <-r.lines:
			if ok {
				rest = append(rest, line)
				continue
			}
			r.cmd.Wait()
			return rest, r.cmd.ProcessState.ExitCode()
		case <-timeout:
			t.Fatalf("still running %v on; stderr:\n%s", d, r.stderr.String())
		}
	}
}

var checkpointedLine = regexp.MustCompile(`^checkpointed at step (\d+): (.*)$`)

// checkCheckpointed checks the example's lines after a notice: the
// checkpoint, with why, and each of n trainers having heard the notice.
func checkCheckpointed(t *testing.T, lines []string, why string, n int) (step string) {
	t.Helper()
	heard := 0
	for _, l := range lines {
		if m := checkpointedLine.FindStringSubmatch(l); m != nil {
			step = m[1]
			if !strings.Contains(m[2], why) {
				t.Errorf("%q: want the reason %q", l, why)
			}
		}
		if strings.HasPrefix(l, "trainer ") && strings.HasSuffix(l, " heard: "+why) {
			heard++
		}
	}
	if step == "" || heard != n {
		t.Errorf("checkpointed at step %q, %d of %d trainers heard %q:\n%s", step, heard, n, why, strings.Join(lines, "\n"))
	}
	return step
}

// TestStopGraceful: SIGTERM to monarch local lets the program checkpoint
// and return (143, status stopped); run again, it resumes there.
func TestStopGraceful(t *testing.T) {
	dir := t.TempDir()
	r := startTrain(t, dir, "local", "--hosts", "2", "--")
	t0 := time.Now()
	r.cmd.Process.Signal(syscall.SIGTERM)
	rest, code := r.finish(t, time.Minute)
	t.Logf("SIGTERM to exit, the program checkpointing on the way: %v", time.Since(t0).Round(time.Millisecond))
	if code != 143 {
		t.Fatalf("exit %d, want 143; stderr:\n%s", code, r.stderr.String())
	}
	step := checkCheckpointed(t, rest, "stop requested (SIGTERM)", 4)
	if out, _, _ := localMonarch(t, time.Minute, nil, "status"); !regexp.MustCompile(`(?m)^\S+\s+stopped by SIGTERM\s+local`).MatchString(out) {
		t.Errorf("monarch status does not show the job stopped:\n%s", out)
	}
	out, stderr, code := localMonarch(t, 2*time.Minute, nil, "local", "--hosts", "2", "--",
		filepath.Join(build(t), "checkpoint"), "-steps", "60", "-work", "1ms", "-checkpoint", r.ckpt)
	if code != 0 || !strings.Contains(out, "resuming from step "+step+" ") || !strings.Contains(out, "trained 60 steps") {
		t.Fatalf("the second run: exit %d, want it to resume from step %s\nstdout:\n%s\nstderr:\n%s", code, step, out, stderr)
	}
	if b, err := os.ReadFile(r.ckpt + ".starts"); err != nil || string(b) != "start 0\nstart 0\n" {
		t.Errorf("starts: %q %v", b, err)
	}
}

// TestTimeLimitWarning: SIGUSR1 to monarch local is a time-limit warning:
// the program hears it, checkpoints and ends of its own accord (0).
func TestTimeLimitWarning(t *testing.T) {
	r := startTrain(t, t.TempDir(), "local", "--hosts", "1", "--")
	t0 := time.Now()
	r.cmd.Process.Signal(syscall.SIGUSR1)
	rest, code := r.finish(t, time.Minute)
	t.Logf("SIGUSR1 to exit: %v", time.Since(t0).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, r.stderr.String())
	}
	checkCheckpointed(t, rest, "time limit", 2)
}

// TestMonarchStopGraceful: monarch stop JOB goes the same way as SIGTERM.
func TestMonarchStopGraceful(t *testing.T) {
	r := startTrain(t, t.TempDir(), "local", "--hosts", "1", "--")
	m := regexp.MustCompile(`monarch: job (\S+):`).FindStringSubmatch(r.stderr.String())
	if m == nil {
		t.Fatalf("no job id in:\n%s", r.stderr.String())
	}
	if out, stderr, code := localMonarch(t, time.Minute, nil, "stop", m[1]); code != 0 {
		t.Fatalf("monarch stop: exit %d\n%s%s", code, out, stderr)
	}
	rest, code := r.finish(t, time.Minute)
	if code != 143 {
		t.Fatalf("exit %d, want 143; stderr:\n%s", code, r.stderr.String())
	}
	checkCheckpointed(t, rest, "stop requested (SIGTERM)", 2)
}

// TestStopGraceExpires: a program that does not return within the job's
// stop_grace has its procs stopped and the job ends (143), nothing left.
func TestStopGraceExpires(t *testing.T) {
	dir := t.TempDir()
	nostop := filepath.Join(build(t), "nostop")
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nstop_grace = \"1s\"\n[procs]\ngpus = 2\n", nostop))
	h := startUntil(t, []string{"MONARCH_STATE_DIR=" + stateDir(t)}, []string{filepath.Join(build(t), "monarch"), "local", "--hosts", "1", job},
		func(line string) bool { return line == "READY" })
	t0 := time.Now()
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after SIGTERM with a stop grace of 1s; stderr:\n%s", h.stderr.String())
	}
	took := time.Since(t0)
	t.Logf("SIGTERM to exit with a stop grace of 1s: %v", took.Round(time.Millisecond))
	if code := h.cmd.ProcessState.ExitCode(); code != 143 || took < time.Second ||
		!strings.Contains(h.stderr.String(), "did not return within the stop grace (1s)") {
		t.Errorf("exit %d after %v, want 143 after the 1s grace; stderr:\n%s", code, took, h.stderr.String())
	}
	checkNothingLeft(t, nostop)
}

// slurmJob writes a job file running the checkpoint example on 2 Slurm
// nodes with the [slurm] lines given, and returns it and the checkpoint.
func slurmJob(t *testing.T, c *testcluster.Cluster, slurm string, args ...string) (job, ckpt string) {
	t.Helper()
	dir := t.TempDir()
	ckpt = filepath.Join(dir, "c.json")
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\n%s\n", c.Partition, slurm))
	var quoted []string
	for _, a := range append(args, "-checkpoint", ckpt) {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	argv := strings.Join(quoted, ", ")
	job = testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [%s]\nhosts = \"hosts.toml\"\n[procs]\ngpus = 1\n",
		filepath.Join(build(t), "checkpoint"), argv))
	return job, ckpt
}

// TestSlurmTimeLimitWarning: under salloc with a 1-minute limit and
// signal_before = 50s, the program is warned about 10 s in, checkpoints
// and ends.
func TestSlurmTimeLimitWarning(t *testing.T) {
	c := testcluster.Get(t)
	job, _ := slurmJob(t, c, "time = \"1\"\nsignal_before = \"50s\"", "-steps", "1000000", "-work", "10ms")
	t0 := time.Now()
	out, stderr, code := runMonarch(t, c, 2*time.Minute, nil, "run", job)
	t.Logf("monarch run under salloc --time=1, warned 50s ahead: ended after %v", time.Since(t0).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	checkCheckpointed(t, strings.Split(out, "\n"), "time limit", 2)
}

// TestSlurmRequeue: a batch job submitted with [slurm] requeue = true and
// requeued (scontrol requeue) comes back; the program counts its starts
// (MONARCH_RESTART_COUNT) and resumes from its checkpoint when it has
// one.
func TestSlurmRequeue(t *testing.T) {
	c := testcluster.Get(t)
	job, ckpt := slurmJob(t, c, "time = \"00:10:00\"\nrequeue = true", "-steps", "1000000", "-work", "20ms")
	jobID, id := detachSlurm(t, c, job)
	starts := func() string { b, _ := os.ReadFile(ckpt + ".starts"); return string(b) }
	waitUntil(t, 5*time.Minute, "the batch job starts", func() bool { return starts() == "start 0\n" })
	time.Sleep(2 * time.Second) // some steps
	if b, err := c.Command(t.Context(), "scontrol", "requeue", id).CombinedOutput(); err != nil {
		t.Fatalf("scontrol requeue %s: %v: %s", id, err, b)
	}
	// A requeued job waits for its begin time (about two minutes here);
	// the test moves it to now, but only once the first run is gone from
	// both nodes and a second has passed: slurmd refuses to launch a job
	// whose credential dates from the second its previous run was killed
	// in ("already killed, do not launch batch job"), and Slurm then ends
	// the job. The begin time is what normally keeps that second apart.
	waitUntil(t, time.Minute, "the job pending again", func() bool {
		b, _ := c.Command(t.Context(), "squeue", "-h", "-j", id, "-o", "%T").Output()
		return strings.TrimSpace(string(b)) == "PENDING"
	})
	waitUntil(t, time.Minute, "both nodes idle after the first run", func() bool {
		b, _ := c.Command(t.Context(), "sinfo", "-h", "-N", "-p", c.Partition, "-o", "%t").Output()
		return strings.Count(string(b), "idle\n") == len(c.Hosts)
	})
	// The first run's end is recorded as a requeue, not as the scancel
	// Slurm makes it look like (issue 40), in the record and in the
	// launcher's last line.
	var first *jobstate.Record
	waitUntil(t, time.Minute, "the first run's end recorded", func() bool {
		first, _ = jobstate.Load(stateDir(t), jobID)
		return first != nil && !first.Active()
	})
	if first.End != "requeued" || first.State != launch.StateStopped {
		t.Errorf("the first run ended %s: %q, want stopped: \"requeued\"", first.State, first.End)
	}
	if out, _ := os.ReadFile(filepath.Join(stateDir(t), jobID+".out")); !strings.Contains(string(out), "ended: requeued (after") {
		t.Errorf("the batch job's output says no requeue:\n%s", out)
	}
	time.Sleep(1500 * time.Millisecond)
	if b, err := c.Command(t.Context(), "scontrol", "update", "JobId="+id, "StartTime=now").CombinedOutput(); err != nil {
		t.Fatalf("scontrol update JobId=%s StartTime=now: %v: %s", id, err, b)
	}
	// Other test binaries may hold the cluster's two nodes for a while.
	if !waitFor(5*time.Minute, func() bool { return starts() == "start 0\nstart 1\n" }) {
		state, _ := c.Command(t.Context(), "scontrol", "show", "job", id).CombinedOutput()
		out, _ := os.ReadFile(filepath.Join(stateDir(t), jobID+".out"))
		t.Fatalf("no second start within 5m; starts %q\n%s\nthe batch job's output:\n%s\nSlurm's logs of job %s:\n%s",
			starts(), state, out, id, slurmLogOf(c, id))
	}
	// One job, one row: its second run.
	status := waitSlurmStatus(t, c, jobID, "running (run 2)")
	if strings.Count(status, "\n") != 3 {
		t.Errorf("status lists more than the job:\n%s", status)
	}
	if b, err := c.Command(t.Context(), "scancel", id).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v: %s", id, err, b)
	}
	waitUntil(t, time.Minute, "the job gone from the queue", func() bool {
		b, err := c.Command(t.Context(), "squeue", "-h", "-j", id).Output()
		return err != nil || strings.TrimSpace(string(b)) == ""
	})
	if slurmOut, err := os.ReadFile(filepath.Join(stateDir(t), jobID+".out")); err == nil {
		t.Logf("the batch job's output:\n%s", slurmOut)
	}
	checkNothingLeft(t, filepath.Join(build(t), "checkpoint"))
}

// slurmLogOf returns the lines of the cluster's slurmctld and slurmd logs
// that name Slurm job id, for a failure message.
func slurmLogOf(c *testcluster.Cluster, id string) string {
	re := regexp.MustCompile(`(JobId=|[Jj]ob |StepId=)` + regexp.QuoteMeta(id) + `\b`)
	logs, _ := filepath.Glob(filepath.Join(c.Base, "log", "slurm*.log"))
	var b strings.Builder
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if re.MatchString(line) {
				fmt.Fprintf(&b, "%s: %s\n", filepath.Base(f), line)
			}
		}
	}
	return b.String()
}

// waitUntil polls cond (bounded).
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !waitFor(d, cond) {
		t.Fatalf("waited %v for %s", d, what)
	}
}

// waitFor polls cond for at most d and reports whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}
