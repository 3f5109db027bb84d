package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/testenv"
)

// arrayID is the array's id in the launcher's first line ("monarch:
// array ID: ...").
func arrayID(t *testing.T, stderr string) string {
	t.Helper()
	for l := range strings.Lines(stderr) {
		if rest, ok := strings.CutPrefix(l, "monarch: array "); ok {
			id, _, _ := strings.Cut(rest, ":")
			return id
		}
	}
	t.Fatalf("no array id in:\n%s", stderr)
	return ""
}

// taskRecords are the records of array id's tasks in state, by index.
func taskRecords(t *testing.T, state, id string) []*jobstate.Record {
	t.Helper()
	recs, err := jobstate.List(state)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []*jobstate.Record
	for _, r := range recs {
		if r.ArrayJob == id {
			tasks = append(tasks, r)
		}
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].ArrayIndex < tasks[j].ArrayIndex })
	return tasks
}

// mostAtOnce is the most tasks whose [Started, Ended] overlap, from
// their records.
func mostAtOnce(tasks []*jobstate.Record) int {
	most := 0
	for _, a := range tasks {
		n := 0
		for _, b := range tasks { // those running when a started
			if !b.Started.After(a.Started) && b.Ended.After(a.Started) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// TestArrayLocal: an array of 4 with %2 from a job file's [array], whose
// task 2 fails: its siblings finish, each task gets its index and its own
// env and args and writes its own output, no more than 2 run at once (by
// their records), the exit status is the failed task's; status shows one
// row with the summary, status ID the failed index and its cause; ID:3 and
// ID_3 name a task; logs ID says how to name one; clean removes the array
// with its tasks.
func TestArrayLocal(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	dir := t.TempDir()
	job := testenv.WriteFile(t, dir, "job.toml", `program = "/bin/sh"
args = ["-c", "echo task=$MONARCH_ARRAY_INDEX of=$MONARCH_ARRAY_JOB lr=$LR args=$*; sleep 0.3; test $MONARCH_ARRAY_INDEX != 2", "sh"]
[array]
spec = "0-3%2"
env.LR = ["0.1", "0.01", "0.001", "0.0001"]
args = [["a0"], ["a1"], ["a2", "x"], ["a3"]]
`)
	_, stderr, code := monarch(t, "run", job)
	id := arrayID(t, stderr)
	if code != 1 {
		t.Errorf("run: exit %d, want 1 (task 2's):\n%s", code, stderr)
	}
	for _, want := range []string{id + "_2 failed", "monarch: array " + id + ": 4 tasks: 0 pending, 0 running, 3 done, 1 failed (2)", id + "_3 done"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("run does not say %q:\n%s", want, stderr)
		}
	}
	lrs := []string{"0.1", "0.01", "0.001", "0.0001"}
	args := []string{"a0", "a1", "a2 x", "a3"}
	for i := range 4 {
		b, err := os.ReadFile(filepath.Join(state, jobstate.TaskID(id, i)+".out"))
		want := "task=" + string(rune('0'+i)) + " of=" + id + " lr=" + lrs[i] + " args=" + args[i] + "\n"
		if err != nil || string(b) != want {
			t.Errorf("task %d's output: %q, %v; want %q", i, b, err, want)
		}
	}
	tasks := taskRecords(t, state, id)
	if len(tasks) != 4 {
		t.Fatalf("%d task records, want 4", len(tasks))
	}
	if n := mostAtOnce(tasks); n != 2 {
		t.Errorf("at most %d tasks ran at once, want 2 (%%2)", n)
	}

	out, _, _ := monarch(t, "status")
	if !strings.Contains(out, id+"  failed: 4 tasks: 0 pending, 0 running, 3 done, 1 failed (2)") || strings.Contains(out, id+"_") {
		t.Errorf("status: want the array as one row with its summary, no task rows:\n%s", out)
	}
	out, _, _ = monarch(t, "status", id)
	for _, want := range []string{"array:  0-3%2", "  task 2: failed (exit 1)\n", id + "_3  3      done"} {
		if !strings.Contains(out, want) {
			t.Errorf("status %s does not say %q:\n%s", id, want, out)
		}
	}
	for _, ref := range []string{id + ":3", id + "_3"} {
		if out, stderr, code := monarch(t, "status", ref); code != 0 || !strings.Contains(out, "job:         "+id+"_3\n") {
			t.Errorf("status %s: exit %d\n%s%s", ref, code, out, stderr)
		}
	}
	if _, stderr, code := monarch(t, "status", id+":7"); code != 1 || !strings.Contains(stderr, "no task 7 in array "+id+" (0-3%2)") {
		t.Errorf("status %s:7: exit %d: %s", id, code, stderr)
	}
	if _, stderr, code := monarch(t, "logs", id); code != 1 || !strings.Contains(stderr, "monarch logs "+id+"_I (or "+id+":I) shows task I's, I one of 0-3") {
		t.Errorf("logs %s: exit %d: %s", id, code, stderr)
	}
	if _, stderr, code := monarch(t, "logs", id+"_2"); code != 1 || !strings.Contains(stderr, "its own output is in "+filepath.Join(state, id+"_2.out")) {
		t.Errorf("logs %s_2: exit %d: %s", id, code, stderr)
	}
	if _, stderr, _ := monarch(t, "status", "nosuch"); !strings.Contains(stderr, "\n  "+id+"  ") || strings.Contains(stderr, id+"_") {
		t.Errorf("status nosuch: want the array among the known jobs, not its tasks:\n%s", stderr)
	}
	if out, _, _ := monarch(t, "clean"); !strings.Contains(out, "removed "+id+" ") || strings.Contains(out, "removed "+id+"_") {
		t.Errorf("clean: want the array removed as one:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(state, id+"*")); len(left) > 0 {
		t.Errorf("clean left %v", left)
	}
}

// waitTask waits until task's record is in state.
func waitTask(t *testing.T, dir, task, state string) *jobstate.Record {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, err := jobstate.Load(dir, task)
		if err == nil && r.State == state {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never %s within 60s: %+v, %v", task, state, r, err)
		}
	}
}

// sleepingArray starts a detached local array of spec whose tasks sleep,
// in a state dir of the test's own, and waits until its task running
// runs; it returns the state dir and the array's id.
func sleepingArray(t *testing.T, spec string, running int) (state, id string) {
	t.Helper()
	state = t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	out, stderr, code := monarch(t, "local", "--detach", "--array", spec, "--", "/bin/sh", "-c", "exec sleep 60")
	id = strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("local --detach --array: exit %d: %s", code, stderr)
	}
	t.Cleanup(func() { monarch(t, "stop", id) })
	waitTask(t, state, jobstate.TaskID(id, running), jobstate.Running)
	return state, id
}

// TestArrayLocalStop: monarch local --array --detach with no job file;
// stop of a pending task ends it before it runs, stop of a running one
// ends that one while the array goes on with the next, stop of the array
// ends its running task and the rest before they run.
func TestArrayLocalStop(t *testing.T) {
	state, id := sleepingArray(t, "0-3%1", 0)
	out, stderr, code := monarch(t, "stop", id+":1")
	if code != 0 || !strings.Contains(out, "stopped job "+id+"_1 before it ran") {
		t.Errorf("stop %s:1 (pending): exit %d: %s%s", id, code, out, stderr)
	}
	if out, stderr, code = monarch(t, "stop", id+"_0"); code != 0 || !strings.Contains(out, "stopped job "+id+"_0") {
		t.Errorf("stop %s_0 (running): exit %d: %s%s", id, code, out, stderr)
	}
	waitTask(t, state, jobstate.TaskID(id, 2), jobstate.Running) // 1 was stopped: 2 is next
	if out, stderr, code = monarch(t, "stop", id); code != 0 || out != "stopped array "+id+": 4 tasks: 0 pending, 0 running, 0 done, 0 failed, 4 stopped\n" {
		t.Errorf("stop %s (the array): exit %d: %s%s", id, code, out, stderr)
	}
	out, _, _ = monarch(t, "status", id)
	for _, want := range []string{"tasks:  4 tasks: 0 pending, 0 running, 0 done, 0 failed, 4 stopped",
		id + "_1  1      stopped by monarch stop before it ran",
		id + "_2  2      stopped by monarch stop",
		id + "_3  3      stopped by monarch stop of the array, before it ran"} {
		if !strings.Contains(out, want) {
			t.Errorf("status %s does not say %q:\n%s", id, want, out)
		}
	}
	b, _ := os.ReadFile(filepath.Join(state, id+".out"))
	if !strings.Contains(string(b), "monarch: array "+id+": 4 tasks:") {
		t.Errorf("the array's launcher's output has no summary:\n%s", b)
	}
}

// TestArrayFailFast: with --fail-fast, the first failed task stops the
// array: the tasks after it never start.
func TestArrayFailFast(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	_, stderr, code := monarch(t, "local", "--fail-fast", "--array", "0-3%1", "--", "/bin/sh", "-c", "test $MONARCH_ARRAY_INDEX != 1")
	id := arrayID(t, stderr)
	if code != 1 || !strings.Contains(stderr, "4 tasks: 0 pending, 0 running, 1 done, 1 failed (1), 2 stopped") {
		t.Errorf("local --fail-fast: exit %d:\n%s", code, stderr)
	}
	for _, i := range []int{2, 3} {
		r := waitTask(t, state, jobstate.TaskID(id, i), jobstate.Stopped)
		if r.End != "stopped: "+id+"_1 failed (fail_fast), before it ran" {
			t.Errorf("task %d: %q", i, r.End)
		}
	}
	// Without it, the siblings of a failed task run.
	_, stderr, code = monarch(t, "local", "--array", "0-3%1", "--", "/bin/sh", "-c", "test $MONARCH_ARRAY_INDEX != 1")
	if code != 1 || !strings.Contains(stderr, "4 tasks: 0 pending, 0 running, 3 done, 1 failed (1)") {
		t.Errorf("local --array without --fail-fast: exit %d:\n%s", code, stderr)
	}
}

// TestArrayRefused: a bad --array names the bad part; a spec that does
// not give the job file's [array] columns their count of tasks names
// both; --fail-fast and --output need what they act on.
func TestArrayRefused(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	dir := t.TempDir()
	job := testenv.WriteFile(t, dir, "job.toml", "program = \"/bin/true\"\n[array]\nspec = \"0-3\"\nenv.P = [\"a\", \"b\", \"c\", \"d\"]\n")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"local", "--array", "0-x", "--", "/bin/true"}, 2, `--array: array "0-x": part "0-x": index "x" is not a number`},
		{[]string{"local", "--array", "0-3%0", "--", "/bin/true"}, 2, `%0: the limit after % must be a number of tasks >= 1`},
		{[]string{"run", job, "--array", "0-1"}, 1, "--array 0-1 gives 2 tasks, but [array] in " + job + ` has parameters for 4 (spec "0-3")`},
		{[]string{"local", "--fail-fast", "--", "/bin/true"}, 2, "--fail-fast stops an array's tasks when one fails: give --array"},
		{[]string{"local", "--detach", "--output", "x.out", "--array", "0-1", "--", "/bin/true"}, 2, "--output: each task of an array writes its own output"},
	}
	for _, tt := range tests {
		_, stderr, code := monarch(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("monarch %q: exit %d, stderr %q; want %d, %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
	// The flag's spec in place of the file's, with as many tasks.
	if _, stderr, code := monarch(t, "run", job, "--array", "4-7%2"); code != 0 || !strings.Contains(stderr, "4 tasks: 0 pending, 0 running, 4 done, 0 failed") {
		t.Errorf("run --array 4-7%%2: exit %d:\n%s", code, stderr)
	}
}

// TestSweepsDocCommands: every command of the sh blocks of docs/sweeps.md's
// "Arrays" runs as written, through sh, with the docs' job id standing for
// a running array's, and exits 0 (TestSweepsDocAfter runs "Jobs that wait
// on jobs").
func TestSweepsDocCommands(t *testing.T) {
	t.Setenv("PATH", build(t)+":"+os.Getenv("PATH"))
	_, id := sleepingArray(t, "0-3", 3)
	data, err := os.ReadFile("docs/sweeps.md")
	if err != nil {
		t.Fatal(err)
	}
	arrays, _, _ := strings.Cut(string(data), "\n## Jobs that wait on jobs\n")
	var lines []string
	inSh := false
	for l := range strings.Lines(arrays) {
		switch {
		case strings.HasPrefix(l, "```"):
			inSh = strings.TrimSpace(l) == "```sh"
		case inSh:
			lines = append(lines, strings.ReplaceAll(strings.TrimSpace(l), "j11e76fGPENLH", id))
		}
	}
	if len(lines) < 5 {
		t.Fatalf("docs/sweeps.md has %d commands", len(lines))
	}
	for _, l := range lines {
		cmd := exec.Command("sh", "-c", l)
		cmd.Dir = t.TempDir()
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", l, err, b)
		}
	}
}

// TestArrayLocalInterrupt: Ctrl-C (SIGINT) of an array's launcher in the
// foreground stops its running tasks and ends the pending ones before
// they run; nothing of the tasks is left running.
func TestArrayLocalInterrupt(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	marker := "sleep 61.25" // a command line of this test's own
	cmd, _, stderr := startMonarch(t, []string{"MONARCH_STATE_DIR=" + state}, "local", "--array", "0-3%2", "--", "/bin/sh", "-c", "exec "+marker)
	var id string
	waitUntil(t, time.Minute, "the array's tasks 0 and 1 to run", func() bool {
		s := stderr.String()
		if !strings.Contains(s, "monarch: array ") {
			return false
		}
		id = arrayID(t, s)
		r0, err0 := jobstate.Load(state, jobstate.TaskID(id, 0))
		r1, err1 := jobstate.Load(state, jobstate.TaskID(id, 1))
		return err0 == nil && err1 == nil && r0.State == jobstate.Running && r1.State == jobstate.Running
	})
	cmd.Process.Signal(os.Interrupt)
	if code := waitExit(t, cmd, time.Minute, stderr); code != 130 {
		t.Errorf("the array's launcher exited %d after Ctrl-C, want 130", code)
	}
	for _, want := range []string{id + "_2 stopped by Ctrl-C (SIGINT) of the array, before it ran", "4 tasks: 0 pending, 0 running, 0 done, 0 failed, 4 stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the launcher does not say %q:\n%s", want, stderr.String())
		}
	}
	if left := leftOf(t, marker, 10*time.Second); len(left) > 0 {
		t.Errorf("tasks still running after Ctrl-C: %v", left)
	}
}

// TestArrayTaskStoppedWhileStarting: a task of a local array whose record
// was ended by monarch stop while its array's launcher started it does
// not run: its launcher says so and leaves the record as stop left it.
func TestArrayTaskStoppedWhileStarting(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	id := "jstopped_1"
	rec := &jobstate.Record{Job: id, Scheduler: "local", Program: "/bin/echo", State: jobstate.Stopped, Started: time.Now(),
		Ended: time.Now(), End: "stopped by monarch stop before it ran", ArrayJob: "jstopped", ArrayIndex: 1}
	if err := jobstate.Save(state, rec); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := monarch(t, "local", "--job-id="+id, "--array-index=1", "--array", "0-1", "--", "/bin/echo", "ran")
	if code != 1 || strings.Contains(out, "ran") || !strings.Contains(stderr, "task "+id+": stopped by monarch stop before it ran") {
		t.Errorf("the stopped task's launcher: exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
	if r := record(t, id); r.State != jobstate.Stopped || r.End != rec.End {
		t.Errorf("its record: %s, %q", r.State, r.End)
	}
}
