package jobstate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/procid"
)

func record(job, state string) *jobstate.Record {
	r := &jobstate.Record{Job: job, Scheduler: jobstate.Direct, Program: "prog", State: state, Started: time.Now()}
	r.Self()
	return r
}

// A running job whose process is gone shows as lost; so does one whose
// pid now belongs to another process (another start time).
func TestListMarksGoneProcessesLost(t *testing.T) {
	dir := t.TempDir()
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleep.Process.Kill()
	alive := record("alive", jobstate.Running)
	alive.PID, alive.PIDStart = sleep.Process.Pid, procid.Start(sleep.Process.Pid)
	reused := record("reused", jobstate.Running)
	reused.PID, reused.PIDStart = sleep.Process.Pid, "1" // that pid, but started at boot
	dead := exec.Command("true")
	dead.Run()
	gone := record("gone", jobstate.Running)
	gone.PID, gone.PIDStart = dead.Process.Pid, "42"
	other := record("elsewhere", jobstate.Running)
	other.Host = "another-host"
	waiter := record("waiter", jobstate.Pending) // a launcher waiting for its dependency, killed
	waiter.PID, waiter.PIDStart = dead.Process.Pid, "42"
	for _, r := range []*jobstate.Record{alive, reused, gone, other, waiter, record("done", jobstate.Done)} {
		if err := jobstate.Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := jobstate.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range recs {
		got[r.Job] = r.State
	}
	want := map[string]string{"alive": "running", "reused": "lost", "gone": "lost", "elsewhere": "running", "waiter": "lost", "done": "done"}
	for job, st := range want {
		if got[job] != st {
			t.Errorf("%s: %q, want %q", job, got[job], st)
		}
	}
	sleep.Process.Kill()
	sleep.Wait()
	if r, err := jobstate.Load(dir, "alive"); err != nil || r.State != jobstate.Lost {
		t.Errorf("after kill: %v, %v", r, err)
	}
}

// A task's id joins its array's and its index as Slurm does; a pending
// job may still run, an ended one not.
func TestTaskIDAndPending(t *testing.T) {
	if got := jobstate.TaskID("j1a2b3ABCDEF", 7); got != "j1a2b3ABCDEF_7" {
		t.Errorf("TaskID: %q", got)
	}
	if !record("p", jobstate.Pending).Active() || record("d", jobstate.Done).Active() {
		t.Error("Active: a pending job may run, a done one not")
	}
}

// Updates are written at most every MinInterval, and the last one is
// never lost.
func TestWriterWritesTheLastUpdate(t *testing.T) {
	dir := t.TempDir()
	w, err := jobstate.NewWriter(dir, *record("j", jobstate.Running))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		w.Update(func(r *jobstate.Record) { r.Hosts, r.Procs = 1+i%2, i })
	}
	w.Update(func(r *jobstate.Record) { r.Procs = 7 })
	var r *jobstate.Record
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, err = jobstate.Load(dir, "j"); err == nil && r.Procs == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last update was not written within 5s: %+v, %v", r, err)
		}
	}
	if r.MaxProcs != 100 || r.MaxHosts != 2 || r.Hosts != 1 {
		t.Errorf("counts %+v", r)
	}
	if err := w.Finish(func(r *jobstate.Record) { r.State, r.Procs = jobstate.Stopped, 0 }); err != nil {
		t.Fatal(err)
	}
	w.Update(func(r *jobstate.Record) { r.Procs = 99 }) // ignored
	time.Sleep(2 * jobstate.MinInterval)
	if r, _ := jobstate.Load(dir, "j"); r.State != jobstate.Stopped || r.Procs != 0 || r.Ended.IsZero() {
		t.Errorf("finished: %+v", r)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left: %v", entries) // no temporary files
	}
}

// Clean removes ended jobs (old enough) with their files, never one that
// may still run.
func TestClean(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	old := record("old", jobstate.Done)
	old.Ended = now.Add(-48 * time.Hour)
	recent := record("recent", jobstate.Failed)
	recent.Ended = now.Add(-time.Minute)
	running := record("running", jobstate.Running)
	remote := record("remote", jobstate.Running)
	remote.Host = "another-host"
	for _, r := range []*jobstate.Record{old, recent, running, remote} {
		jobstate.Save(dir, r)
		os.WriteFile(filepath.Join(dir, r.Job+".log"), []byte("0123456789"), 0o600)
	}
	files := func(job string) []string { return []string{filepath.Join(dir, job+".log")} }
	clean := func(age time.Duration) []string {
		recs, err := jobstate.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		removed, err := jobstate.Clean(recs, dir, age, now, files)
		if err != nil {
			t.Fatal(err)
		}
		var jobs []string
		for _, r := range removed {
			if r.Files != 2 || r.Bytes < 10 {
				t.Errorf("%s: %d files, %d bytes", r.Job, r.Files, r.Bytes)
			}
			jobs = append(jobs, r.Job)
		}
		return jobs
	}
	if got := clean(24 * time.Hour); strings.Join(got, " ") != "old" {
		t.Errorf("older than a day: removed %v", got)
	}
	if got := clean(0); strings.Join(got, " ") != "recent" {
		t.Errorf("all ended: removed %v", got)
	}
	jobs, bytes, err := jobstate.Usage(dir)
	if err != nil || jobs != 2 || bytes < 20 {
		t.Errorf("usage: %d jobs, %d bytes, %v", jobs, bytes, err)
	}
}

func TestNewIDPrefix(t *testing.T) {
	t.Setenv(jobstate.EnvIDPrefix, "ci-42_")
	id, err := jobstate.NewID()
	if err != nil || !strings.HasPrefix(id, "ci-42_j") {
		t.Fatalf("%q, %v", id, err)
	}
	for _, bad := range []string{"a.b", "a b", "x/y", strings.Repeat("a", 33)} {
		t.Setenv(jobstate.EnvIDPrefix, bad)
		if _, err := jobstate.NewID(); err == nil || !strings.Contains(err.Error(), jobstate.EnvIDPrefix) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The store refuses a dir that is a symbolic link, and never writes
// through a link where a record goes.
func TestSaveRefusesLinks(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(base, "jobs")
	os.Symlink(real, link)
	if err := jobstate.Save(link, record("j", jobstate.Running)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Save into a linked dir: %v", err)
	}
	if _, err := jobstate.List(link); err == nil {
		t.Error("List of a linked dir: no error")
	}
	victim := filepath.Join(base, "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	os.Symlink(victim, filepath.Join(real, "j.json"))
	if err := jobstate.Save(real, record("j", jobstate.Running)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("wrote through a link: %q", b)
	}
}

// A record written before batch jobs had scheduler-neutral fields (its
// Slurm job in slurm_job) still loads, as a Slurm batch job; a record
// written now keeps its batch fields under their own names.
func TestRecordCompatibility(t *testing.T) {
	dir := t.TempDir()
	old := `{
  "job": "slurm-4242",
  "scheduler": "slurm",
  "program": "/bin/prog",
  "state": "submitted",
  "exit": 0,
  "launcher_host": "login1",
  "slurm_job": "4242",
  "hosts": 0,
  "procs": 0,
  "started": "2025-01-02T03:04:05Z"
}
`
	if err := os.WriteFile(filepath.Join(dir, "slurm-4242.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := jobstate.Load(dir, "slurm-4242")
	if err != nil {
		t.Fatal(err)
	}
	if r.Batch != "slurm" || r.BatchID != "4242" || r.State != jobstate.Submitted || r.Host != "login1" || r.Program != "/bin/prog" {
		t.Errorf("old record read as %+v", r)
	}
	if !r.Active() {
		t.Error("a submitted job its scheduler has not said is finished is not active")
	}
	r.BatchState = "finished"
	if r.Active() {
		t.Error("a submitted job its scheduler says is finished is still active")
	}

	r.Job, r.BatchID = "slurm-4343", "4343"
	if err := jobstate.Save(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(jobstate.Path(dir, r.Job))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"batch": "slurm"`, `"batch_id": "4343"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("saved record lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "slurm_job") || strings.Contains(string(b), "4242") {
		t.Errorf("saved record keeps the old field:\n%s", b)
	}
	if back, err := jobstate.Load(dir, r.Job); err != nil || back.Batch != "slurm" || back.BatchID != "4343" || back.BatchState != "" {
		t.Errorf("new record read back as %+v, %v", back, err)
	}
}

// TestCleanArray: an ended array goes with its tasks, as one; a task is
// never removed alone while its array has a record, nor an array while a
// task may still run.
func TestCleanArray(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ended := record("arr", jobstate.Failed)
	ended.Array, ended.Ended = "0-1", now.Add(-time.Minute)
	running := record("run", jobstate.Running)
	running.Array = "0-1"
	recs := []*jobstate.Record{ended, running}
	for _, a := range []*jobstate.Record{ended, running} {
		for i := range 2 {
			task := record(jobstate.TaskID(a.Job, i), jobstate.Done)
			task.ArrayJob, task.ArrayIndex, task.Ended = a.Job, i, now.Add(-time.Minute)
			recs = append(recs, task)
		}
	}
	lastTask := record(jobstate.TaskID("lone", 1), jobstate.Running)
	lone := record("lone", jobstate.Done)
	lone.Array, lone.Ended = "1", now.Add(-time.Minute)
	lastTask.ArrayJob, lastTask.ArrayIndex = "lone", 1
	lastTask.Host = "another-host"
	recs = append(recs, lone, lastTask)
	for _, r := range recs {
		if err := jobstate.Save(dir, r); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, r.Job+".log"), []byte("0123456789"), 0o600)
	}
	list, err := jobstate.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := jobstate.Clean(list, dir, 0, now, func(job string) []string { return []string{filepath.Join(dir, job+".log")} })
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Job != "arr" || removed[0].Files != 6 {
		t.Fatalf("removed %+v, want arr alone with its 2 tasks (6 files)", removed)
	}
	for _, job := range []string{"arr_0", "arr_1"} {
		if _, err := os.Stat(jobstate.Path(dir, job)); err == nil {
			t.Errorf("%s is left", job)
		}
	}
	for _, job := range []string{"run", "run_0", "run_1", "lone", "lone_1"} {
		if _, err := os.Stat(jobstate.Path(dir, job)); err != nil {
			t.Errorf("%s was removed: %v", job, err)
		}
	}
}
