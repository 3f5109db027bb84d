package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
)

// Jobs that wait on jobs (monarch run --after, --after-ok, --after-any),
// in Slurm's words and as Slurm keeps them: after (once the job has
// started, or ended without starting), afterok (once it has ended with
// status 0; never if it ended otherwise), afterany (once it has ended).
// A job submitted to Slurm's queue waits there (sbatch --dependency, with
// --kill-on-invalid-dep=yes); any other waits in its launcher, which
// records it Pending and reads the job store until every dependency is
// met, or one never can be: then the job ends as Slurm ends it, stopped
// before it ran, saying which dependency failed.

// Dependency is a job another waits for (see jobstate.Dependency).
type Dependency = jobstate.Dependency

// afterFlags are the command-line flags of the dependency kinds.
var afterFlags = map[string]string{
	jobstate.AfterStart: "--after",
	jobstate.AfterOK:    "--after-ok",
	jobstate.AfterAny:   "--after-any",
}

// afterWords name the dependency kinds as status shows them: "after ok".
var afterWords = map[string]string{
	jobstate.AfterStart: "after",
	jobstate.AfterOK:    "after ok",
	jobstate.AfterAny:   "after any",
}

// maxAfter bounds the jobs one job waits for.
const maxAfter = 64

// ParseAfter reads the values of one dependency flag (kind: AfterStart,
// AfterOK or AfterAny), each a job or a comma-separated list of them, and
// appends them to deps, each job once per kind.
func ParseAfter(deps []Dependency, kind string, values []string) ([]Dependency, error) {
	flag, ok := afterFlags[kind]
	if !ok {
		return nil, fmt.Errorf("no dependency kind %q (want %s, %s or %s)", kind, jobstate.AfterStart, jobstate.AfterOK, jobstate.AfterAny)
	}
	for _, v := range values {
		for _, ref := range strings.Split(v, ",") {
			ref = strings.TrimSpace(ref)
			switch {
			case ref == "":
				return nil, fmt.Errorf("%s %q: an empty job id; want IDs separated by commas (%s j1a2b3,8)", flag, v, flag)
			case len(ref) > 64 || strings.Trim(ref, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:") != "":
				return nil, fmt.Errorf("%s %q: want a job's id (letters, digits, '-', '_' and ':', as monarch status shows it) or its Slurm job id", flag, clip(ref, 64))
			}
			d := Dependency{Kind: kind, Job: ref}
			if slices.Contains(deps, d) {
				continue
			}
			if len(deps) == maxAfter {
				return nil, fmt.Errorf("%s: a job waits for at most %d jobs", flag, maxAfter)
			}
			deps = append(deps, d)
		}
	}
	return deps, nil
}

// AfterText says what a job waits for, as status shows it: "after ok
// j1, after any j2".
func AfterText(deps []Dependency) string {
	parts := make([]string, len(deps))
	for i, d := range deps {
		parts[i] = afterWords[d.Kind] + " " + d.Job
	}
	return strings.Join(parts, ", ")
}

// afterArgs are deps as flags of a monarch command line.
func afterArgs(deps []Dependency) []string {
	args := make([]string, len(deps))
	for i, d := range deps {
		args[i] = afterFlags[d.Kind] + "=" + d.Job
	}
	return args
}

// resolveAfter names each of cfg.After by its job's id in the store (a
// ref may be a Slurm job id) and, for a new job, refuses a dependency
// that can never be met. jobs are the store's, as Status lists them.
func resolveAfter(cfg *RunConfig, jobs []*JobState) error {
	for i, d := range cfg.After {
		r, err := Find(jobs, cfg.StateDir, d.Job)
		if err != nil {
			return fmt.Errorf("%s %s: %w", afterFlags[d.Kind], d.Job, err)
		}
		cfg.After[i].Job = r.Job
		if cfg.JobID != "" {
			continue // a detached job's launcher: it records what it finds
		}
		if _, never := afterState(cfg.After[i], jobs); never != "" {
			return fmt.Errorf("%s %s: it can never be met: %s", afterFlags[d.Kind], d.Job, never)
		}
	}
	return nil
}

// afterState says where dependency d stands among jobs: met, or never
// to be met, and why ("job j1 failed (exit 1)"); neither while it may
// still be. A job no longer in the store (monarch clean) has ended, not
// known how.
func afterState(d Dependency, jobs []*JobState) (met bool, never string) {
	var r *JobState
	var tasks []*JobState
	for _, j := range jobs {
		if j.Job == d.Job {
			r = j
		}
		if j.ArrayJob == d.Job {
			tasks = append(tasks, j)
		}
	}
	if r == nil && len(tasks) == 0 {
		// monarch clean removes only ended jobs: how it ended is lost.
		if d.Kind == jobstate.AfterOK {
			return false, fmt.Sprintf("job %s is no longer in the job store (monarch clean), so it cannot be known to have succeeded", d.Job)
		}
		return true, ""
	}
	if r == nil || r.Array != "" || len(tasks) > 0 {
		return arrayState(d, r, tasks)
	}
	return jobAfterState(d, r)
}

// jobAfterState is afterState for one job's record r.
func jobAfterState(d Dependency, r *JobState) (met bool, never string) {
	switch d.Kind {
	case jobstate.AfterStart:
		return r.State != StatePending && r.State != StateSubmitted || !r.Active(), ""
	case jobstate.AfterAny:
		return !r.Active(), ""
	}
	if r.Active() {
		return false, ""
	}
	if r.State == StateDone && r.Exit == 0 {
		return true, ""
	}
	return false, endedWhy(r)
}

// arrayState is afterState for an array (its own record r, nil if
// unknown, and its tasks' records): after, once every task has started;
// afterok, once every task is done, never once one has not; afterany,
// once every task has ended.
func arrayState(d Dependency, r *JobState, tasks []*JobState) (met bool, never string) {
	all := len(tasks) > 0
	for _, t := range tasks {
		m, n := jobAfterState(d, t)
		if n != "" {
			return false, fmt.Sprintf("task %d of array %s: %s", t.ArrayIndex, d.Job, n)
		}
		all = all && m
	}
	ended := r == nil || !r.Active() // its launcher starts no more tasks
	switch d.Kind {
	case jobstate.AfterStart:
		return all || ended, ""
	case jobstate.AfterAny:
		return ended && (all || len(tasks) == 0), ""
	}
	if ended && r != nil && (r.State != StateDone || len(tasks) == 0) {
		return false, endedWhy(r)
	}
	return ended && all, ""
}

// endedWhy says how a job that is not done ended: "job j1 failed (exit
// 1)", "job j1 was stopped (stopped by monarch stop)".
func endedWhy(r *JobState) string {
	end := r.End
	switch r.State {
	case StateFailed:
		if !strings.HasPrefix(end, "failed") {
			end = fmt.Sprintf("failed (exit %d)", r.Exit)
		}
		return "job " + r.Job + " " + end
	case StateLost:
		return "job " + r.Job + " was lost (its launcher is gone)"
	case StateDone:
		return fmt.Sprintf("job %s failed (exit %d)", r.Job, r.Exit)
	}
	if end == "" {
		end = r.State
	}
	return fmt.Sprintf("job %s was %s (%s)", r.Job, r.State, end)
}

// neverSatisfied is how a job that will never run for a failed
// dependency ended, naming it when the store tells which.
func neverSatisfied(deps []Dependency, jobs []*JobState) string {
	for _, d := range deps {
		if _, never := afterState(d, jobs); never != "" {
			return "dependency never satisfied: " + never
		}
	}
	return "dependency never satisfied"
}

// queueDependency is the dependency of a batch job of k's queue on deps,
// in Slurm's terms (sbatch --dependency): the ids in the queue of the
// jobs not met yet (one met already may be one the queue has forgotten).
// A dependency that never ran in the queue cannot be given to it.
func queueDependency(k kind, deps []Dependency, jobs []*JobState) (string, error) {
	byKind := map[string][]string{}
	var kinds []string
	for _, d := range deps {
		if met, _ := afterState(d, jobs); met {
			continue
		}
		r, _ := Find(jobs, "", d.Job)
		if r == nil || r.Batch != k.name || r.BatchID == "" {
			sched := "elsewhere"
			if r != nil {
				sched = "with " + r.Scheduler
			}
			return "", fmt.Errorf("%s %s: the job runs %s, never in %s's queue, so %[4]s cannot wait for it; "+
				"wait for a job %[4]s runs (monarch run on %[4]s hosts), or run this one with ssh or local hosts",
				afterFlags[d.Kind], d.Job, sched, k.title)
		}
		if !slices.Contains(kinds, d.Kind) {
			kinds = append(kinds, d.Kind)
		}
		byKind[d.Kind] = append(byKind[d.Kind], r.BatchID)
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = k + ":" + strings.Join(byKind[k], ":")
	}
	return strings.Join(parts, ","), nil
}

// awaitAfter records the job Pending, with what it waits for, and waits
// until every dependency is met: then it returns ok and the job runs
// under cfg.JobID. Otherwise it has recorded the job's end (a dependency
// never met, monarch stop, a signal) and returns the launcher's exit
// status.
func awaitAfter(ctx context.Context, cfg *RunConfig, sched string) (code int, ok bool, err error) {
	if cfg.JobID == "" {
		if cfg.JobID, err = jobstate.NewID(); err != nil {
			return 0, false, fmt.Errorf("launch: %w", err)
		}
	}
	id := cfg.JobID
	rec := JobState{Job: id, Scheduler: sched, Program: programOf(cfg.Job), State: StatePending, Started: time.Now(),
		StopGrace: cfg.Job.StopGrace, After: cfg.After}
	if old, err := jobstate.Load(cfg.StateDir, id); err == nil {
		rec.Output = old.Output
	}
	rec.Self()
	st, err := jobstate.NewWriter(cfg.StateDir, rec)
	if err != nil {
		return 0, false, fmt.Errorf("launch: %w", err)
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	end := func(state string, code int, text string) (int, bool, error) {
		st.Finish(func(r *JobState) { r.State, r.Exit, r.End, r.Ended = state, code, text, time.Now() })
		fmt.Fprintf(cfg.Progress, "monarch: job %s ended: %s\n", id, text)
		return code, false, nil
	}
	fmt.Fprintf(cfg.Progress, "monarch: job %s waits to start: %s\n", id, AfterText(cfg.After))
	met := make([]bool, len(cfg.After))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		jobs, err := Status(ctx, cfg.StateDir)
		if err != nil {
			// The store is unreadable (not private, gone): nothing
			// would ever say the dependencies are met.
			return end(StateFailed, 1, "failed: "+strings.TrimPrefix(err.Error(), "launch: "))
		}
		left := 0
		for i, d := range cfg.After {
			if met[i] {
				continue // as in Slurm: once met, met for good
			}
			m, never := afterState(d, jobs)
			if never != "" {
				return end(StateStopped, 1, "dependency never satisfied: "+never)
			}
			if met[i] = m; m {
				fmt.Fprintf(cfg.Progress, "monarch: job %s: %s is met\n", id, AfterText([]Dependency{d}))
			} else {
				left++
			}
		}
		if left == 0 {
			// Written now, and the writer stopped: the run's own
			// writer takes the record over.
			st.Finish(func(r *JobState) { r.State, r.Started = StateStarting, time.Now() })
			return 0, true, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			text := "stopped before it ran"
			var sig StopSignal
			switch {
			case stopRequested(cfg.StateDir, id):
				text = "stopped by monarch stop before it ran"
			case errors.As(context.Cause(ctx), &sig) && sig.Signal == os.Interrupt:
				return end(StateStopped, 130, "interrupted (Ctrl-C) before it ran")
			case errors.As(context.Cause(ctx), &sig):
				text = sig.Error() + " before it ran"
			}
			return end(StateStopped, 128+int(syscall.SIGTERM), text)
		}
	}
}
