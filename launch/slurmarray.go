package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/arrayspec"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// submitArray submits the array of cfg's job as one batch array (sbatch
// --array=SPEC), each of whose batch jobs runs `monarch run --job-id=ID
// --array-index=slurm`: the task the queue's index names. Every task's
// record is written first, Submitted; a task's launcher takes its record
// over. Detached it returns at once; else it follows the array until
// every task has ended. The array waits in the queue for cfg.After (jobs
// are the store's).
func submitArray(ctx context.Context, cfg *RunConfig, k kind, jobs []*JobState) (int, error) {
	if len(cfg.Rerun) == 0 {
		return 0, errors.New("launch: array: no command line to run its tasks with")
	}
	p, err := k.open(cfg.Hosts).prepare(ctx)
	if err != nil {
		return 0, err
	}
	if cfg.Monarch = p.monarch; cfg.Monarch == "" {
		cfg.Monarch = cfg.Self
	}
	dep, err := queueDependency(k, cfg.After, jobs)
	if err != nil {
		return 0, err
	}
	id, err := jobstate.NewID()
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	rec := arrayRecord(cfg, k, id, StateSubmitted)
	rec.Batch, rec.Host = k.name, hostname()
	if err := jobstate.Save(cfg.StateDir, &rec); err != nil {
		return 0, err
	}
	if err := saveTasks(cfg, &rec, StateSubmitted); err != nil {
		return 0, err
	}
	rerun := slices.Concat(cfg.Rerun[:1], []string{"--job-id=" + id, "--array-index=" + SlurmArrayIndex}, cfg.Rerun[1:])
	// Each task's output where OutputPath puts a task's: %a is its index.
	out := strings.ReplaceAll(cfg.StateDir, "%", "%%") + "/" + id + "_%a.out"
	bid, err := k.queue.submit(ctx, cfg, batchJob{rerun: rerun, name: cfg.jobName(), output: out, array: cfg.Job.Array.Spec.String(), dependency: dep})
	if err != nil {
		removeArray(cfg, id)
		return 0, err
	}
	setBatchIDs(cfg, id, bid)
	if cfg.Detach {
		printDetached(cfg, id, fmt.Sprintf("%s array %s, %d tasks", k.title, bid, len(cfg.Job.Array.Tasks)), "")
		return 0, nil
	}
	fmt.Fprintf(cfg.Progress, "monarch: array %s: %s array %s, %d tasks (%s); Ctrl-C cancels it\n", id, k.title, bid, len(cfg.Job.Array.Tasks), cfg.Job.Array.Spec)
	return followArray(ctx, cfg, id)
}

// SlurmArrayIndex, given as a task's index (--array-index), stands for
// the one Slurm gives the batch job it runs in: SLURM_ARRAY_TASK_ID.
const SlurmArrayIndex = "slurm"

// setBatchIDs names the batch array in the array's record, and each
// task's batch job (ID_i, as Slurm names a task) in the task's, unless its
// launcher has taken the record over already.
func setBatchIDs(cfg *RunConfig, id, bid string) {
	jobstate.Amend(cfg.StateDir, id, func(r *JobState) bool { r.BatchID = bid; return true })
	for _, t := range cfg.Job.Array.Tasks {
		jobstate.Amend(cfg.StateDir, jobstate.TaskID(id, t.Index), func(r *JobState) bool {
			if r.BatchID != "" {
				return false
			}
			r.BatchID = jobstate.TaskID(bid, t.Index)
			return true
		})
	}
}

// removeArray removes the records of an array that was never submitted.
func removeArray(cfg *RunConfig, id string) {
	for _, t := range cfg.Job.Array.Tasks {
		jobstate.RemoveFiles([]string{jobstate.Path(cfg.StateDir, jobstate.TaskID(id, t.Index))})
	}
	jobstate.RemoveFiles([]string{jobstate.Path(cfg.StateDir, id)})
}

// followInterval is how often followArray looks at the tasks.
const followInterval = time.Second

// followArray prints a line as each task of array id starts and ends,
// until all have, then the summary; it returns 0 only if every task is
// done. Ctrl-C (ctx) cancels the array and waits, bounded, for its end.
func followArray(ctx context.Context, cfg *RunConfig, id string) (int, error) {
	ctx, stop := interruptible(ctx)
	defer stop()
	seen := map[string]string{}
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	var cancelled <-chan time.Time
	done := ctx.Done()
	for {
		jobs, err := Status(context.WithoutCancel(ctx), cfg.StateDir)
		if err != nil {
			return 0, err
		}
		tasks := ArrayTasks(jobs, id)
		active := 0
		for _, t := range tasks {
			was := seen[t.Job]
			switch {
			case t.Active() && t.State != StateSubmitted && t.State != StatePending && was == "":
				seen[t.Job] = "started"
				fmt.Fprintf(cfg.Progress, "monarch: %s started (%s)\n", t.Job, schedulerID(t))
			case !t.Active() && was != "ended":
				seen[t.Job] = "ended"
				if t.State == StateDone {
					fmt.Fprintf(cfg.Progress, "monarch: %s done\n", t.Job)
				} else {
					fmt.Fprintf(cfg.Progress, "monarch: %s %s\n", t.Job, taskCause(t))
				}
			}
			if t.Active() {
				active++
			}
		}
		if active == 0 {
			state, code := arrayEnd(tasks, context.Cause(ctx))
			summary := ArraySummary(tasks)
			jobstate.Amend(cfg.StateDir, id, func(r *JobState) bool {
				r.State, r.Exit, r.End, r.Ended = state, code, summary, time.Now()
				return true
			})
			fmt.Fprintf(cfg.Progress, "monarch: array %s: %s\n", id, summary)
			for _, t := range tasks {
				if t.State == StateFailed || t.State == StateLost {
					fmt.Fprintf(cfg.Progress, "  %s: %s\n", t.Job, taskCause(t))
				}
			}
			return code, nil
		}
		select {
		case <-tick.C:
		case <-done:
			done = nil
			fmt.Fprintf(cfg.Progress, "monarch: array %s: cancelling it\n", id)
			if err := Stop(context.WithoutCancel(ctx), cfg.StateDir, id, cfg.Grace); err != nil {
				fmt.Fprintf(cfg.Progress, "monarch: %v\n", err)
			}
			cancelled = time.After(arrayStopGrace(cfg) + 30*time.Second)
		case <-cancelled:
			return 128 + 15, fmt.Errorf("launch: array %s: tasks still running %v after it was cancelled; monarch status %[1]s", id, arrayStopGrace(cfg)+30*time.Second)
		}
	}
}

// schedulerID names where a task runs: "Slurm job 12".
func schedulerID(t *JobState) string {
	if t.BatchID != "" {
		return fmt.Sprintf("%s job %s", kinds[t.Batch].title, t.BatchID)
	}
	return t.Scheduler
}

// arrayStates asks scontrol once about every task of batch array id: one
// line per task, the pending ones together on one line.
func (slurmQueue) arrayStates(ctx context.Context, id string) map[int]batchState {
	out, known, err := showJob(ctx, id)
	if err != nil || !known {
		return nil // unknown, or too old for Slurm to know: each task's own record says
	}
	return parseSlurmArray(out)
}

// parseSlurmArray reads the tasks of `scontrol -o show job ARRAYID`: each
// line's ArrayTaskId (an index, or the pending ones as an --array spec,
// "2-3%2") and its state (parseSlurmJob).
func parseSlurmArray(out string) map[int]batchState {
	states := map[int]batchState{}
	for line := range strings.Lines(out) {
		var ids string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "ArrayTaskId="); ok {
				ids = v
			}
		}
		if ids == "" {
			continue
		}
		b := parseSlurmJob(line)
		if i, err := strconv.Atoi(ids); err == nil {
			if i >= 0 && i < arrayspec.MaxArraySize {
				states[i] = b
			}
			continue
		}
		sp, err := arrayspec.Parse(ids)
		if err != nil {
			continue
		}
		for _, i := range sp.Indices {
			states[i] = b
		}
	}
	return states
}
