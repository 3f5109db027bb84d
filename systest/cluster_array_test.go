package systest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// arrayJob writes a job that runs sh -c script on hosts, as an array of
// spec.
func arrayJob(t *testing.T, hosts, script, spec string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	return testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = \"/bin/sh\"\nargs = [\"-c\", %q]\nhosts = \"hosts.toml\"\nstop_grace = \"2s\"\n[array]\nspec = %q\n", script, spec))
}

// TestSlurmArray: monarch run of an array under Slurm is one sbatch
// --array; with %2 and --exclusive two tasks run at once, on h1 and h2;
// task 1 fails while its siblings finish; each task gets its index as
// MONARCH_ARRAY_INDEX and SLURM_ARRAY_TASK_ID and takes over its record
// with its own Slurm job id; status names a task by Slurm's ARRAYID_I.
func TestSlurmArray(t *testing.T) {
	c := testcluster.Get(t)
	hosts := fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 1\npartition = %q\nsbatch_args = [\"--exclusive\"]\n", c.Partition)
	job := arrayJob(t, hosts, `echo task=$MONARCH_ARRAY_INDEX slurm=$SLURM_ARRAY_TASK_ID on=$(hostname); sleep 2; test $MONARCH_ARRAY_INDEX != 1`, "0-3%2")
	_, stderr, code := runMonarch(t, c, 4*time.Minute, nil, "run", job)
	m := regexp.MustCompile(`monarch: array (\S+): Slurm array (\d+), 4 tasks \(0-3%2\)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("run: exit %d, no array line:\n%s", code, stderr)
	}
	id, bid := m[1], m[2]
	t.Cleanup(func() { c.Command(t.Context(), "scancel", bid).Run() })
	if code != 1 || !strings.Contains(stderr, "monarch: array "+id+": 4 tasks: 0 pending, 0 running, 3 done, 1 failed (1)") {
		t.Errorf("run: exit %d (want 1, task 1's):\n%s", code, stderr)
	}
	state := stateDir(t)
	tasks := taskRecords(t, state, id)
	if len(tasks) != 4 {
		t.Fatalf("%d task records", len(tasks))
	}
	if n := mostAtOnce(tasks); n > 2 {
		t.Errorf("%d tasks ran at once, want at most 2 (%%2)", n)
	}
	on := map[string]bool{}
	for i, r := range tasks {
		if r.Batch != "slurm" || r.BatchID == "" || r.BatchID == jobstate.TaskID(bid, i) {
			t.Errorf("task %d's record names batch job %s %q, want its own Slurm job id", i, r.Batch, r.BatchID)
		}
		b, _ := os.ReadFile(filepath.Join(state, jobstate.TaskID(id, i)+".out"))
		mm := regexp.MustCompile(`task=(\d) slurm=(\d) on=(h\d)`).FindStringSubmatch(string(b))
		if mm == nil || mm[1] != fmt.Sprint(i) || mm[2] != fmt.Sprint(i) {
			t.Errorf("task %d's output:\n%s", i, b)
			continue
		}
		on[mm[3]] = true
	}
	if !on["h1"] || !on["h2"] {
		t.Errorf("the tasks ran on %v, want h1 and h2", on)
	}
	out, _, _ := runMonarch(t, c, 30*time.Second, nil, "status", bid+"_1")
	if !strings.Contains(out, "job:         "+id+"_1\n") || !strings.Contains(out, "failed (exit 1)") {
		t.Errorf("status %s_1:\n%s", bid, out)
	}
	out, _, _ = runMonarch(t, c, 30*time.Second, nil, "status", id)
	if !strings.Contains(out, "  task 1: failed (exit 1)\n") || !regexp.MustCompile(`(?m)^slurm job: +`+bid+`$`).MatchString(out) {
		t.Errorf("status %s:\n%s", id, out)
	}
}

// TestSlurmArrayStop: monarch stop of a queued task (by Slurm's name for
// it) ends it before it runs; of a detached Slurm array, cancels it: its
// running task stops (its program gets its stop grace) and the pending
// ones end before they run; Slurm is left with none of them.
func TestSlurmArrayStop(t *testing.T) {
	c := testcluster.Get(t)
	hosts := fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 1\npartition = %q\n", c.Partition)
	job := arrayJob(t, hosts, "exec sleep 120", "0-2%1")
	out, stderr, code := runMonarch(t, c, time.Minute, nil, "run", "--detach", job)
	id := strings.TrimSpace(out)
	m := regexp.MustCompile(`submitted \(Slurm array (\d+), 3 tasks\)`).FindStringSubmatch(stderr)
	if code != 0 || m == nil {
		t.Fatalf("run --detach: exit %d, stdout %q:\n%s", code, out, stderr)
	}
	t.Cleanup(func() { c.Command(t.Context(), "scancel", m[1]).Run() })
	waitTask(t, stateDir(t), jobstate.TaskID(id, 0), jobstate.Running)
	waitSlurmStatus(t, c, id, "running: 3 tasks: 2 pending, 1 running, 0 done, 0 failed")
	// Status asks Slurm about the array once, not about each task: the
	// real scontrol, behind a script that notes each call.
	real, err := exec.LookPath("scontrol")
	if err != nil {
		t.Fatal(err)
	}
	wrap, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	testenv.WriteFile(t, wrap, "scontrol", fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\nexec %s \"$@\"\n", calls, real))
	os.Chmod(filepath.Join(wrap, "scontrol"), 0o755)
	if out, _, code := runMonarch(t, c, 30*time.Second, []string{"PATH=" + wrap + ":" + os.Getenv("PATH")}, "status"); code != 0 || !strings.Contains(out, "2 pending, 1 running") {
		t.Fatalf("status: exit %d:\n%s", code, out)
	}
	if b, _ := os.ReadFile(calls); string(b) != "-o show job "+m[1]+"\n" {
		t.Errorf("status ran scontrol so, want once for the array (%s):\n%s", m[1], b)
	}
	if out, stderr, code := runMonarch(t, c, time.Minute, nil, "stop", m[1]+"_1"); code != 0 || out != "stopped job "+id+"_1 before it ran\n" {
		t.Errorf("stop %s_1 (a queued task, by Slurm's name): exit %d: %s%s", m[1], code, out, stderr)
	}
	if out, stderr, code := runMonarch(t, c, time.Minute, nil, "stop", id); code != 0 || !strings.HasPrefix(out, "asked slurm to cancel array "+id+" (batch array "+m[1]+")") {
		t.Fatalf("stop %s: exit %d: %s%s", id, code, out, stderr)
	}
	waitSlurmStatus(t, c, id, "stopped: 3 tasks: 0 pending, 0 running, 0 done, 0 failed, 3 stopped")
	out, _, _ = runMonarch(t, c, 30*time.Second, nil, "status", id)
	for _, want := range []string{id + "_0  0      stopped by monarch stop", id + "_1  1      stopped by monarch stop before it ran", id + "_2  2      stopped by monarch stop before it ran"} {
		if !strings.Contains(out, want) {
			t.Errorf("status %s does not say %q:\n%s", id, want, out)
		}
	}
	waitUntil(t, time.Minute, "Slurm to forget the array's tasks", func() bool {
		b, _ := c.Command(t.Context(), "squeue", "-h", "-j", m[1]).Output()
		return strings.TrimSpace(string(b)) == ""
	})
}

// TestSSHArray: over ssh the array's launcher runs here, each task a
// launcher of its own on the hosts, at most %1 at once.
func TestSSHArray(t *testing.T) {
	c := testcluster.Get(t)
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q]\nconfig_file = %q\n", c.Hosts[1], c.SSHConfig)
	job := arrayJob(t, hosts, "echo task=$MONARCH_ARRAY_INDEX", "3,5%1")
	_, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", job)
	if code != 0 || !strings.Contains(stderr, ": 2 tasks: 0 pending, 0 running, 2 done, 0 failed") {
		t.Fatalf("run: exit %d:\n%s", code, stderr)
	}
	id := arrayID(t, stderr)
	tasks := taskRecords(t, stateDir(t), id)
	if len(tasks) != 2 || tasks[0].Scheduler != "ssh" || mostAtOnce(tasks) != 1 {
		t.Errorf("tasks %+v", tasks)
	}
	for _, i := range []int{3, 5} {
		b, _ := os.ReadFile(filepath.Join(stateDir(t), jobstate.TaskID(id, i)+".out"))
		if !strings.Contains(string(b), fmt.Sprintf("task=%d\n", i)) {
			t.Errorf("task %d's output:\n%s", i, b)
		}
	}
}

// TestSlurmArrayInAllocation: inside an allocation (salloc) the array's
// tasks run as they do over ssh, from the array's launcher, each as
// steps of the allocation, at most %1 at once.
func TestSlurmArrayInAllocation(t *testing.T) {
	c := testcluster.Get(t)
	job := arrayJob(t, slurmHosts(1), "echo task=$MONARCH_ARRAY_INDEX in=$SLURM_JOB_ID", "0-1%1")
	_, stderr, code := runOnCluster(t, c, 2*time.Minute, nil, "salloc", "-N1", "--immediate=20", filepath.Join(build(t), "monarch"), "run", job)
	if code != 0 || !strings.Contains(stderr, "2 tasks: 0 pending, 0 running, 2 done, 0 failed") {
		t.Fatalf("salloc monarch run: exit %d:\n%s", code, stderr)
	}
	id := arrayID(t, stderr)
	tasks := taskRecords(t, stateDir(t), id)
	if len(tasks) != 2 || mostAtOnce(tasks) != 1 {
		t.Fatalf("tasks %+v", tasks)
	}
	for i, r := range tasks {
		b, _ := os.ReadFile(filepath.Join(stateDir(t), jobstate.TaskID(id, i)+".out"))
		if r.Batch != "slurm" || r.BatchID == "" || !strings.Contains(string(b), fmt.Sprintf("task=%d in=%s\n", i, r.BatchID)) {
			t.Errorf("task %d: in %s job %q, output:\n%s", i, r.Batch, r.BatchID, b)
		}
	}
}

// TestSlurmArrayInterrupt: Ctrl-C of monarch run following a Slurm array
// cancels the array: its running task stops, the pending one ends before
// it runs, and monarch run says so and exits.
func TestSlurmArrayInterrupt(t *testing.T) {
	c := testcluster.Get(t)
	hosts := fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 1\npartition = %q\n", c.Partition)
	job := arrayJob(t, hosts, "exec sleep 120", "0-1%1")
	cmd, _, stderr := startMonarch(t, c.Env, "run", job)
	var bid string
	waitUntil(t, 2*time.Minute, "task 0 to start", func() bool {
		m := regexp.MustCompile(`Slurm array (\d+),`).FindStringSubmatch(stderr.String())
		if m != nil && bid == "" {
			bid = m[1]
			t.Cleanup(func() { c.Command(t.Context(), "scancel", bid).Run() })
		}
		return strings.Contains(stderr.String(), "_0 started")
	})
	cmd.Process.Signal(os.Interrupt)
	waitExit(t, cmd, 2*time.Minute, stderr)
	if s := stderr.String(); !strings.Contains(s, "cancelling it") || !strings.Contains(s, "2 tasks: 0 pending, 0 running, 0 done, 0 failed, 2 stopped") {
		t.Errorf("monarch run after Ctrl-C: exit %d:\n%s", cmd.ProcessState.ExitCode(), s)
	}
	waitUntil(t, time.Minute, "Slurm to forget the array's tasks", func() bool {
		b, _ := c.Command(t.Context(), "squeue", "-h", "-j", bid).Output()
		return strings.TrimSpace(string(b)) == ""
	})
}
