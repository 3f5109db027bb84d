package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// Job arrays. A job with an array (hostsconfig.Job.Array: [array] in its
// file, or --array) runs as tasks, each a job of its own under
// jobstate.TaskID(ID, i), with a record of its own written when the
// array starts, so that status shows the whole array at once. Under a
// scheduler with a queue, from outside its batch jobs, the array is one
// batch array (slurmarray.go). Otherwise this launcher is the array's:
// it runs each task as a child launcher, the same monarch command line
// with the task's id and index (RunConfig.ArrayJob, ArrayIndex), at most
// Spec.Limit at once, each task's output in its own file.

// The variables a task's client and procs get.
const (
	// ArrayIndexVar is the task's index in its array.
	ArrayIndexVar = "MONARCH_ARRAY_INDEX"
	// ArrayJobVar is the array's job id.
	ArrayJobVar = "MONARCH_ARRAY_JOB"
)

// asTask makes cfg's job the task cfg.ArrayIndex of its array: the task's
// own env and args, and the variables that tell it which task it is.
func asTask(cfg *RunConfig) error {
	a := cfg.Job.Array
	if a == nil {
		return fmt.Errorf("launch: task %d of array %s: the job has no array", cfg.ArrayIndex, cfg.ArrayJob)
	}
	t, ok := a.Task(cfg.ArrayIndex)
	if !ok {
		return fmt.Errorf("launch: task %d of array %s: not an index of its spec %s", cfg.ArrayIndex, cfg.ArrayJob, a.Spec)
	}
	job := *cfg.Job // the caller's stays as it was
	job.Env = slices.Concat(job.Env, t.Env, []string{
		ArrayIndexVar + "=" + strconv.Itoa(t.Index), ArrayJobVar + "=" + cfg.ArrayJob})
	if os.Getenv("SLURM_ARRAY_TASK_ID") != "" {
		// Slurm's own, for programs written for sbatch --array.
		job.Env = append(job.Env, "SLURM_ARRAY_TASK_ID="+strconv.Itoa(t.Index))
	}
	job.Args = slices.Concat(job.Args, t.Args)
	cfg.Job = &job
	cfg.JobID = jobstate.TaskID(cfg.ArrayJob, t.Index)
	return nil
}

// arrayStopGrace is how long the array's launcher gives a task's launcher
// to stop once asked: the program's stop grace, the launcher's own, and
// some slack for its teardown.
func arrayStopGrace(cfg *RunConfig) time.Duration {
	return cfg.Job.StopGrace + cfg.Grace + 5*time.Second
}

// arrayRecord is the record of array id as it starts, taking over one a
// detached submit wrote.
func arrayRecord(cfg *RunConfig, k kind, id, state string) JobState {
	rec := JobState{Job: id, Scheduler: k.name, Program: programOf(cfg.Job), State: state, Started: time.Now(),
		Array: cfg.Job.Array.Spec.String(), StopGrace: cfg.Job.StopGrace, After: cfg.After}
	if old, err := jobstate.Load(cfg.StateDir, id); err == nil {
		rec.Started, rec.Output = old.Started, old.Output
	}
	return rec
}

// saveTasks writes the record of every task of the array rec, in state
// (Pending here, Submitted in a queue), as rec's process's.
func saveTasks(cfg *RunConfig, rec *JobState, state string) error {
	for _, t := range cfg.Job.Array.Tasks {
		id := jobstate.TaskID(rec.Job, t.Index)
		tr := JobState{Job: id, Scheduler: rec.Scheduler, Program: rec.Program, State: state, Started: rec.Started,
			PID: rec.PID, PIDStart: rec.PIDStart, Host: rec.Host, Batch: rec.Batch, StopGrace: rec.StopGrace,
			ArrayJob: rec.Job, ArrayIndex: t.Index, Output: OutputPath(cfg.StateDir, id)}
		if err := jobstate.Save(cfg.StateDir, &tr); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
	}
	return nil
}

// taskRun is a task whose launcher runs.
type taskRun struct {
	index int
	id    string
	proc  *child.Process
}

// runArray runs the array of cfg's job from here, each task as a child
// launcher, and returns 0 only if every task is done.
func runArray(ctx context.Context, cfg *RunConfig, k kind) (int, error) {
	if len(cfg.Rerun) == 0 {
		return 0, errors.New("launch: array: no command line to run its tasks with")
	}
	if len(cfg.After) > 0 {
		// The whole array waits, as one job, before its first task.
		if code, ok, err := awaitAfter(ctx, cfg, k.name); !ok {
			return code, err
		}
	}
	a := cfg.Job.Array
	id := cfg.JobID
	if id == "" {
		var err error
		if id, err = jobstate.NewID(); err != nil {
			return 0, fmt.Errorf("launch: %w", err)
		}
	}
	rec := arrayRecord(cfg, k, id, StateRunning)
	rec.Self()
	if err := saveTasks(cfg, &rec, StatePending); err != nil {
		return 0, err
	}
	st, err := jobstate.NewWriter(cfg.StateDir, rec)
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	at := "all at once"
	if a.Spec.Limit > 0 && a.Spec.Limit < len(a.Tasks) {
		at = fmt.Sprintf("at most %d at once", a.Spec.Limit)
	}
	fmt.Fprintf(cfg.Progress, "monarch: array %s: %d tasks (%s), %s; monarch status %[1]s shows them\n", id, len(a.Tasks), a.Spec, at)

	ctx, stop := interruptible(ctx)
	defer stop()
	r := &arrayRun{cfg: cfg, id: id}
	r.run(ctx)
	tasks := r.tasks()
	state, code := arrayEnd(tasks, context.Cause(ctx))
	summary := ArraySummary(tasks)
	st.Finish(func(rec *JobState) { rec.State, rec.Exit, rec.End = state, code, summary })
	fmt.Fprintf(cfg.Progress, "monarch: array %s: %s\n", id, summary)
	for _, t := range tasks {
		if t.State == StateFailed || t.State == StateLost {
			fmt.Fprintf(cfg.Progress, "  %s: %s\n", t.Job, taskCause(t))
		}
	}
	return code, nil
}

// arrayRun is the array launcher's bookkeeping while its tasks run.
type arrayRun struct {
	cfg     *RunConfig
	id      string
	running []*taskRun
	// stopping says why the tasks not started yet never will: "" while
	// they may.
	stopping string
}

func (r *arrayRun) run(ctx context.Context) {
	a := r.cfg.Job.Array
	slots := len(a.Tasks)
	if a.Spec.Limit > 0 {
		slots = a.Spec.Limit
	}
	ended := make(chan *taskRun)
	done := ctx.Done()
	next := 0
	for {
		for r.stopping == "" && next < len(a.Tasks) && len(r.running) < slots {
			t := a.Tasks[next]
			next++
			tr, failed := r.start(t)
			if failed {
				r.failed(jobstate.TaskID(r.id, t.Index))
			}
			if tr == nil {
				continue
			}
			r.running = append(r.running, tr)
			go func() {
				<-tr.proc.Done()
				ended <- tr
			}()
		}
		if r.stopping != "" {
			for ; next < len(a.Tasks); next++ {
				r.never(jobstate.TaskID(r.id, a.Tasks[next].Index))
			}
		}
		if len(r.running) == 0 && (next == len(a.Tasks) || r.stopping != "") {
			return
		}
		select {
		case tr := <-ended:
			r.running = slices.DeleteFunc(r.running, func(x *taskRun) bool { return x == tr })
			if r.ended(tr) {
				r.failed(tr.id)
			}
		case <-done:
			done = nil
			why := context.Cause(ctx).Error() // "stopped by SIGTERM"
			if stopRequested(r.cfg.StateDir, r.id) {
				why = "stopped by monarch stop"
				for _, tr := range r.running {
					requestStop(r.cfg.StateDir, tr.id) // said so by each task
				}
			}
			r.stop(why + " of the array")
		}
	}
}

// failed stops the rest when the array fails fast.
func (r *arrayRun) failed(task string) {
	if r.cfg.Job.Array.FailFast && r.stopping == "" {
		fmt.Fprintf(r.cfg.Progress, "monarch: array %s: %s failed: stopping the other tasks (fail_fast)\n", r.id, task)
		r.stop("stopped: " + task + " failed (fail_fast)")
	}
}

// stop asks every running task's launcher to stop (each gives its program
// its stop grace), and keeps the pending ones from starting.
func (r *arrayRun) stop(why string) {
	r.stopping = why
	procs := make([]*child.Process, len(r.running))
	for i, tr := range r.running {
		procs[i] = tr.proc
	}
	go child.StopAll(procs, arrayStopGrace(r.cfg))
}

// start starts task t's launcher: nil when it was stopped before it ran,
// or could not start (failed: its record says why).
func (r *arrayRun) start(t hostsconfig.ArrayTask) (*taskRun, bool) {
	cfg := r.cfg
	id := jobstate.TaskID(r.id, t.Index)
	if rec, err := jobstate.Load(cfg.StateDir, id); err == nil && rec.State != StatePending {
		fmt.Fprintf(cfg.Progress, "monarch: %s: %s\n", id, taskCause(rec)) // monarch stop ID_i, while it waited
		return nil, false
	}
	out := OutputPath(cfg.StateDir, id)
	fail := func(err error) (*taskRun, bool) {
		endTask(cfg.StateDir, id, "", StateFailed, 1, "failed: could not start: "+err.Error())
		fmt.Fprintf(cfg.Progress, "monarch: %s could not start: %v\n", id, err)
		return nil, true
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	args := slices.Concat(cfg.Rerun[:1], []string{"--job-id=" + id, "--array-index=" + strconv.Itoa(t.Index)}, cfg.Rerun[1:])
	cmd := exec.Command(cfg.Self, args...)
	cmd.Dir, _ = os.Getwd()
	cmd.Env = append(os.Environ(), hostsconfig.EnvStateDir+"="+cfg.StateDir)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own group: a Ctrl-C here reaches it once, as this launcher's
	// SIGTERM, and a kill takes what it started with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := child.Start(cmd)
	if err != nil {
		return fail(err)
	}
	// Its launcher's now, until it takes the record over: monarch stop
	// signals it from here on.
	jobstate.Amend(cfg.StateDir, id, func(r *JobState) bool {
		if r.State != StatePending {
			return false
		}
		r.State = StateStarting
		r.Of(p.Pid())
		return true
	})
	fmt.Fprintf(cfg.Progress, "monarch: %s started (pid %d), output in %s\n", id, p.Pid(), out)
	return &taskRun{index: t.Index, id: id, proc: p}, false
}

// ended says how task tr ended, from its record, and reports whether it
// failed. A launcher that ended without recording its end is its failure.
func (r *arrayRun) ended(tr *taskRun) bool {
	dir := r.cfg.StateDir
	rec, err := jobstate.Load(dir, tr.id)
	if err != nil || rec.Active() || rec.State == StateLost {
		ps := tr.proc.Cmd.ProcessState
		endTask(dir, tr.id, "", StateFailed, child.ExitStatus(ps), "failed: its launcher "+child.Describe(tr.proc.Err())+" without recording how the task ended")
		rec, err = jobstate.Load(dir, tr.id)
		if err != nil {
			fmt.Fprintf(r.cfg.Progress, "monarch: %s ended: %v\n", tr.id, err)
			return true
		}
	}
	switch rec.State {
	case StateDone:
		fmt.Fprintf(r.cfg.Progress, "monarch: %s done\n", tr.id)
		return false
	}
	fmt.Fprintf(r.cfg.Progress, "monarch: %s %s\n", tr.id, taskCause(rec))
	return rec.State != StateStopped // one task stopped alone is no failure of the array
}

// never records a task that will not run now.
func (r *arrayRun) never(id string) {
	if endTask(r.cfg.StateDir, id, StatePending, StateStopped, 0, r.stopping+", before it ran") {
		fmt.Fprintf(r.cfg.Progress, "monarch: %s %s, before it ran\n", id, r.stopping)
	}
}

// endTask records the end of a task whose launcher did not (or that never
// ran); false when its record had ended already, or, with from set, is in
// another state than from (its launcher took it over).
func endTask(dir, id, from, state string, exit int, end string) bool {
	changed := false
	jobstate.Amend(dir, id, func(r *JobState) bool {
		if !r.Active() && r.State != StateLost || from != "" && r.State != from {
			return false
		}
		r.State, r.Exit, r.End, r.Ended, r.Hosts, r.Procs = state, exit, end, time.Now(), 0, 0
		changed = true
		return true
	})
	return changed
}

// tasks are the records of the array's tasks, in index order.
func (r *arrayRun) tasks() []*JobState {
	var out []*JobState
	for _, t := range r.cfg.Job.Array.Tasks {
		if rec, err := jobstate.Load(r.cfg.StateDir, jobstate.TaskID(r.id, t.Index)); err == nil {
			out = append(out, rec)
		}
	}
	return out
}

// arrayEnd is the state and exit status of an array whose tasks ended so:
// done (0) only if every task is; failed, with the first failed task's
// status, if one failed; else stopped, with the status of the signal that
// stopped it (cause, a StopSignal: 130 for Ctrl-C), else SIGTERM's.
func arrayEnd(tasks []*JobState, cause error) (string, int) {
	for _, t := range tasks {
		if t.State == StateFailed || t.State == StateLost {
			return StateFailed, max(t.Exit, 1)
		}
	}
	for _, t := range tasks {
		if t.State != StateDone {
			sig := syscall.SIGTERM
			var stop StopSignal
			if errors.As(cause, &stop) {
				if s, ok := stop.Signal.(syscall.Signal); ok {
					sig = s
				}
			}
			return StateStopped, 128 + int(sig)
		}
	}
	return StateDone, 0
}

// taskCause is how a task ended, in a few words: "failed: rank 0 on h0
// exited with status 1 (exit 1)".
func taskCause(t *JobState) string {
	text := t.End
	if text == "" {
		text = t.State
	}
	if t.State == StateFailed && t.Exit != 0 && !strings.Contains(text, "exit") {
		text += fmt.Sprintf(" (exit %d)", t.Exit)
	}
	return text
}

// startArray runs the array of cfg's job: submitted to the scheduler's
// queue as one batch array from outside its batch jobs; detached as a
// launcher of its own here (--detach); else from this launcher. jobs are
// the store's, for the dependencies (cfg.After).
func startArray(ctx context.Context, cfg *RunConfig, k kind, jobs []*JobState) (int, error) {
	if cfg.Self == "" {
		exe, err := os.Executable()
		if err != nil {
			return 0, fmt.Errorf("launch: find the monarch binary: %w", err)
		}
		cfg.Self = exe
	}
	if k.queue != nil && k.queue.current() == "" {
		return submitArray(ctx, cfg, k, jobs)
	}
	if cfg.Detach {
		return 0, detach(ctx, cfg, k, jobs)
	}
	return runArray(ctx, cfg, k)
}

// interruptible is ctx, also cancelled by Ctrl-C (SIGINT), as SIGTERM
// cancels it (with a StopSignal): an array's launcher stops its tasks
// then, which run in process groups of their own (or in Slurm's queue)
// and do not see the terminal's SIGINT. stop ends the watch.
func interruptible(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	go func() {
		select {
		case sig := <-sigs:
			cancel(StopSignal{Signal: sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
	}
}
