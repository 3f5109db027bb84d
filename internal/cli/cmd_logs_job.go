package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/monarch-go/monarch/launch"
	"github.com/monarch-go/monarch/logagg"
)

// Which job monarch logs reads. A JOB argument is taken as status and
// stop take it (the id monarch run printed, or the Slurm job id); a job
// with a log but no record (left by older versions) by its log's name.
// Without one: the newest job, or, with --follow, the newest job that
// still runs (a follow of an ended job would only replay it).

// logsJob finds the job of ref ("" for the default); rec is its record,
// nil for a log without one.
func logsJob(ctx context.Context, dir, ref string, follow bool) (string, *launch.JobState, error) {
	jobs, err := launch.Status(ctx, dir)
	if err != nil {
		return "", nil, err
	}
	if ref != "" {
		j, err := launch.Find(jobs, dir, ref)
		if err == nil && j.Array != "" {
			// Each task writes a log of its own; one of them, named.
			tasks := launch.ArrayTasks(jobs, j.Job)
			return "", nil, fmt.Errorf("logs: job %s is an array of %d tasks (%s), each with a log of its own: monarch logs %[1]s_I (or %[1]s:I) shows task I's, I one of %[3]s",
				j.Job, len(tasks), strings.Split(j.Array, "%")[0])
		}
		if err == nil {
			return j.Job, j, nil
		}
		if _, serr := os.Stat(logagg.LogFiles(dir, ref)[0]); jobIDPattern.MatchString(ref) && serr == nil {
			return ref, nil, nil
		}
		return "", nil, fmt.Errorf("logs: %w", err)
	}
	if follow {
		for _, j := range jobs {
			if j.Active() {
				return j.Job, j, nil
			}
		}
		if len(jobs) == 0 {
			return "", nil, fmt.Errorf("logs: no job runs: there are no jobs in %s", dir)
		}
		last := jobs[0]
		return "", nil, fmt.Errorf("logs: no job runs; the newest, %s, ended (%s): monarch logs %[1]s replays it", last.Job, stateText(last))
	}
	names, err := logagg.Jobs(dir)
	if err != nil {
		return "", nil, err
	}
	if len(names) == 0 {
		return "", nil, fmt.Errorf("logs: no jobs in %s", dir)
	}
	for _, j := range jobs {
		if j.Job == names[0] {
			return j.Job, j, nil
		}
	}
	return names[0], nil, nil
}

// awaitLog waits, for a follow, until job's log exists: a job in its
// scheduler's queue has none until its launcher runs. It says what it
// waits for on w, once, and gives up when the job ends without one (or
// ctx ends: Ctrl-C).
func awaitLog(ctx context.Context, dir string, rec *launch.JobState, w io.Writer) error {
	said := false
	for {
		if hasLog(dir, rec.Job) {
			return nil
		}
		jobs, err := launch.Status(ctx, dir)
		if err != nil {
			return err
		}
		j, err := launch.Find(jobs, dir, rec.Job)
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		if !j.Active() {
			if hasLog(dir, rec.Job) {
				return nil
			}
			return noLogYet(j, w)
		}
		if !said {
			fmt.Fprintf(w, "monarch: job %s is %s; waiting for it to start (Ctrl-C stops waiting, not the job)\n", j.Job, stateText(j))
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// hasLog reports whether job's log exists in dir.
func hasLog(dir, job string) bool {
	_, err := os.Stat(logagg.LogFiles(dir, job)[0])
	return err == nil
}

// noLogYet answers a replay of a job that has written no log: one that
// runs (or waits in its queue) has none yet, which is no error; one that
// ended without one is.
func noLogYet(rec *launch.JobState, w io.Writer) error {
	if rec.Active() {
		fmt.Fprintf(w, "monarch: job %s is %s and has no output yet (monarch logs -f %[1]s waits for it)\n", rec.Job, stateText(rec))
		return nil
	}
	if _, err := os.Stat(rec.Output); rec.ArrayJob != "" && err == nil {
		// A task's program writes its stdout and stderr there.
		return fmt.Errorf("logs: job %s ended (%s) with no output in its log; its own output is in %s", rec.Job, stateText(rec), rec.Output)
	}
	return fmt.Errorf("logs: job %s ended (%s) with no output", rec.Job, stateText(rec))
}

// sayEnd tells, after a follow, how job ended, as its record says; the
// record is written just after the log ends, so it is given a moment.
func sayEnd(ctx context.Context, dir, job string, w io.Writer) {
	for range 20 {
		jobs, err := launch.Status(ctx, dir)
		if err != nil {
			return
		}
		j, err := launch.Find(jobs, dir, job)
		if errors.As(err, new(launch.NoJobError)) {
			return // a log without a record
		}
		if err == nil && !j.Active() {
			fmt.Fprintf(w, "monarch: job %s ended: %s\n", j.Job, stateText(j))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
