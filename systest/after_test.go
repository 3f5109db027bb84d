package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/testenv"
)

// Jobs that wait on jobs, on this machine: the launcher records the job
// pending, waits, and runs it, or ends it as Slurm would when what it
// waits for fails.

// gate is a job that runs, here, in the background, until the test
// opens it (or 2 minutes pass), then exits with status exit. open opens
// it; it is opened at the end of the test in any case, and the test waits
// for it to end before its dirs go (else it would not see its door open,
// and would write its end into a dir removed).
func gate(t *testing.T, exit string) (id string, open func()) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "open")
	out, stderr, code := monarch(t, "local", "--detach", "--", "/bin/sh", "-c",
		`i=0; while [ ! -e "$0" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; exit `+exit, f)
	id = strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("local --detach: exit %d, stdout %q\n%s", code, out, stderr)
	}
	open = func() {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Error(err)
		}
	}
	state := os.Getenv("MONARCH_STATE_DIR")
	t.Cleanup(func() {
		open()
		waitUntil(t, 30*time.Second, "the gate job "+id+" to end", func() bool {
			r, err := jobstate.Load(state, id)
			return err != nil || !r.Active()
		})
	})
	waitStatus(t, id, map[string]string{"STATE": "running"})
	return id, open
}

func record(t *testing.T, job string) *jobstate.Record {
	t.Helper()
	r, err := jobstate.Load(os.Getenv("MONARCH_STATE_DIR"), job)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAfterOKTrainThenEvaluate: evaluate, detached with --after-ok train,
// is pending while train runs (status says for what), and starts only
// once train is done: its record's start is after train's end.
func TestAfterOKTrainThenEvaluate(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	train, open := gate(t, "0")
	out, stderr, code := monarch(t, "local", "--detach", "--after-ok", train, "--", "/bin/echo", "evaluated")
	eval := strings.TrimSpace(out)
	if code != 0 || eval == "" {
		t.Fatalf("local --detach --after-ok: exit %d, stdout %q\n%s", code, out, stderr)
	}
	waitStatus(t, eval, map[string]string{"STATE": "pending (after ok " + train + ")", "SCHEDULER": "local"})
	if out, _, _ := monarch(t, "status", eval); !strings.Contains(out, "waits for:   after ok "+train+"\n") {
		t.Errorf("status %s does not say what it waits for:\n%s", eval, out)
	}
	open()
	waitStatus(t, train, map[string]string{"STATE": "done"})
	waitStatus(t, eval, map[string]string{"STATE": "done"})
	tr, ev := record(t, train), record(t, eval)
	if ev.Started.Before(tr.Ended) {
		t.Errorf("evaluate started at %v, before train ended at %v", ev.Started, tr.Ended)
	}
	if len(ev.After) != 1 || ev.After[0] != (jobstate.Dependency{Kind: jobstate.AfterOK, Job: train}) {
		t.Errorf("evaluate's record waits for %+v", ev.After)
	}
	b, _ := os.ReadFile(filepath.Join(state, eval+".out"))
	for _, want := range []string{"monarch: job " + eval + " waits to start: after ok " + train + "\n",
		"monarch: job " + eval + ": after ok " + train + " is met\n", "evaluated\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the waiting launcher's output does not say %q:\n%s", want, b)
		}
	}
}

// TestAfterOKOnFailure: a job that waits --after-ok on a job that fails
// ends, never running its program, saying why, with a non-zero status;
// --after-any on it runs; --after-ok on it now is refused at once, and
// so is a job that is not in the store.
func TestAfterOKOnFailure(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	train, open := gate(t, "3")
	ran := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(filepath.Join(build(t), "monarch"), "local", "--after-ok", train, "--", "/bin/touch", ran)
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	waitUntil(t, 30*time.Second, "the job to say what it waits for", func() bool { return strings.Contains(stderr.String(), "waits to start") })
	open()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatalf("the waiting job did not end within a minute of its dependency's failure:\n%s", stderr.String())
	}
	why := "dependency never satisfied: job " + train + " failed (exit 3)"
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "ended: "+why) {
		t.Errorf("exit %d:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("its program ran")
	}
	rows, _ := statusRows(t)
	var dependent string
	for job, row := range rows {
		if job != train && row["PROGRAM"] == "/bin/touch" {
			dependent = job
		}
	}
	if out, _, _ := monarch(t, "status", dependent); !strings.Contains(out, "state:       "+why+"\n") {
		t.Errorf("status %s:\n%s", dependent, out)
	}
	if r := record(t, dependent); r.State != jobstate.Stopped || r.Exit == 0 || r.End != why {
		t.Errorf("the record: state %s, exit %d, end %q", r.State, r.Exit, r.End)
	}

	if out, stderr, code := monarch(t, "local", "--after-any", train, "--", "/bin/echo", "ran anyway"); code != 0 || out != "ran anyway\n" {
		t.Errorf("--after-any on a failed job: exit %d, stdout %q\n%s", code, out, stderr)
	}
	n := len(rows)
	_, stderr2, code := monarch(t, "local", "--after-ok", train, "--", "/bin/touch", ran)
	if want := "--after-ok " + train + ": it can never be met: job " + train + " failed (exit 3)"; code != 1 || !strings.Contains(stderr2, want) {
		t.Errorf("--after-ok on a failed job: exit %d, want %q:\n%s", code, want, stderr2)
	}
	job := testenv.WriteFile(t, t.TempDir(), "job.toml", "program = \"/bin/true\"\n")
	_, stderr2, code = monarch(t, "run", "--after", "nosuch,"+train, job)
	if code != 1 || !strings.Contains(stderr2, `--after nosuch: no job "nosuch" in `) || !strings.Contains(stderr2, train) {
		t.Errorf("--after an unknown job: exit %d:\n%s", code, stderr2)
	}
	if rows, out := statusRows(t); len(rows) != n+1 {
		t.Errorf("a refused job left a record:\n%s", out)
	}
}

// TestAfterStart: --after runs the job once the other has started, while
// it still runs.
func TestAfterStart(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	first, _ := gate(t, "0")
	out, stderr, code := monarch(t, "local", "--after", first, "--", "/bin/echo", "alongside")
	if code != 0 || out != "alongside\n" || !strings.Contains(stderr, "after "+first+" is met") {
		t.Errorf("--after a running job: exit %d, stdout %q\n%s", code, out, stderr)
	}
	if r := record(t, first); r.State != jobstate.Running {
		t.Errorf("the first job is %s, want it still running", r.State)
	}
}

// TestStopPendingJob: monarch stop of a job that waits ends it before it
// runs, and says so; its program never runs.
func TestStopPendingJob(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	first, _ := gate(t, "0")
	ran := filepath.Join(t.TempDir(), "ran")
	out, stderr, code := monarch(t, "local", "--detach", "--after-any", first, "--", "/bin/touch", ran)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("local --detach --after-any: exit %d, stdout %q\n%s", code, out, stderr)
	}
	waitStatus(t, id, map[string]string{"STATE": "pending (after any " + first + ")"})
	out, stderr, code = monarch(t, "stop", id)
	if want := "stopped job " + id + " before it ran\n"; code != 0 || out != want {
		t.Errorf("stop of a pending job: exit %d, stdout %q, want %q\n%s", code, out, want, stderr)
	}
	if r := record(t, id); r.State != jobstate.Stopped || r.End != "stopped by monarch stop before it ran" || r.Alive() {
		t.Errorf("the record: state %s, end %q, its launcher alive %v", r.State, r.End, r.Alive())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("its program ran")
	}
}

// TestAfterLostDependency: a dependency whose launcher is killed shows
// lost, and a job that waits --after-ok on it ends, as on a failure.
func TestAfterLostDependency(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	first, _ := gate(t, "0")
	out, stderr, code := monarch(t, "local", "--detach", "--after-ok", first, "--", "/bin/true")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("local --detach --after-ok: exit %d, stdout %q\n%s", code, out, stderr)
	}
	waitStatus(t, id, map[string]string{"STATE": "pending (after ok " + first + ")"})
	if err := syscall.Kill(record(t, first).PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, first, map[string]string{"STATE": "lost"})
	waitUntil(t, 30*time.Second, "the waiting job to end", func() bool { return !record(t, id).Active() })
	if r := record(t, id); r.End != "dependency never satisfied: job "+first+" was lost (its launcher is gone)" {
		t.Errorf("the record: state %s, end %q", r.State, r.End)
	}
}

// TestAfterStoreNotPrivate: a waiting launcher whose job store stops
// being private (so nothing it reads there can be trusted) ends, saying
// why, rather than wait on for good.
func TestAfterStoreNotPrivate(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	first, _ := gate(t, "0")
	cmd, _, stderr := startMonarch(t, []string{"MONARCH_STATE_DIR=" + state}, "local", "--after-ok", first, "--", "/bin/true")
	waitUntil(t, 30*time.Second, "the job to say what it waits for", func() bool { return strings.Contains(stderr.String(), "waits to start") })
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(state, 0o700) })
	if code := waitExit(t, cmd, 30*time.Second, stderr); code != 1 || !strings.Contains(stderr.String(), "ended: failed: job state: ") {
		t.Errorf("exit %d:\n%s", code, stderr.String())
	}
}

// TestCtrlCPendingJob: Ctrl-C (SIGINT) of a launcher that waits ends its
// job before it runs, recorded so, with 130, as Ctrl-C of a running job.
func TestCtrlCPendingJob(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	first, _ := gate(t, "0")
	cmd, _, stderr := startMonarch(t, []string{"MONARCH_STATE_DIR=" + state}, "local", "--after-ok", first, "--", "/bin/true")
	m := regexp.MustCompile(`monarch: job (\S+) waits to start`)
	waitUntil(t, 30*time.Second, "the job to say what it waits for", func() bool { return m.MatchString(stderr.String()) })
	cmd.Process.Signal(os.Interrupt)
	code := waitExit(t, cmd, 30*time.Second, stderr)
	id := m.FindStringSubmatch(stderr.String())[1]
	if code != 130 {
		t.Errorf("exit %d, want 130:\n%s", code, stderr.String())
	}
	if r := record(t, id); r.State != jobstate.Stopped || r.End != "interrupted (Ctrl-C) before it ran" {
		t.Errorf("the record: state %s, end %q", r.State, r.End)
	}
}

// TestArrayAfterOK: an array waits as one job: detached with --after-ok
// train, it is pending while train runs, and none of its tasks starts
// before train is done; a job --after-ok the array starts once every task
// is done.
func TestArrayAfterOK(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	train, open := gate(t, "0")
	out, stderr, code := monarch(t, "local", "--detach", "--array", "0-2%2", "--after-ok", train, "--", "/bin/sh", "-c", "echo task $MONARCH_ARRAY_INDEX")
	sweep := strings.TrimSpace(out)
	if code != 0 || sweep == "" {
		t.Fatalf("local --detach --array --after-ok: exit %d, stdout %q\n%s", code, out, stderr)
	}
	waitStatus(t, sweep, map[string]string{"STATE": "pending (after ok " + train + ")"})
	out, stderr, code = monarch(t, "local", "--detach", "--after-ok", sweep, "--", "/bin/echo", "evaluated")
	eval := strings.TrimSpace(out)
	if code != 0 || eval == "" {
		t.Fatalf("local --detach --after-ok ARRAY: exit %d, stdout %q\n%s", code, out, stderr)
	}
	open()
	waitStatus(t, eval, map[string]string{"STATE": "done"})
	tr, ev := record(t, train), record(t, eval)
	for i := range 3 {
		task := record(t, jobstate.TaskID(sweep, i))
		if task.State != "done" || task.Started.Before(tr.Ended) || ev.Started.Before(task.Ended) {
			t.Errorf("task %d: %s, ran %v to %v; train ended %v, evaluate started %v", i, task.State, task.Started, task.Ended, tr.Ended, ev.Started)
		}
	}
	if a := record(t, sweep); a.State != "done" || len(a.After) != 1 || a.Array != "0-2%2" {
		t.Errorf("the array's record: %s, after %+v, array %q", a.State, a.After, a.Array)
	}
}
