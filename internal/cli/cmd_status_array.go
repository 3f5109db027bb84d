package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/monarch-go/monarch/launch"
)

// Arrays in status: the array is one row, its state and a summary of its
// tasks; status ID shows the summary, the failed tasks with their causes,
// and every task.

// listedJobs are the rows of status: every job but the tasks of an array
// whose own record is there (its row speaks for them).
func listedJobs(jobs []*launch.JobState) []*launch.JobState {
	arrays := map[string]bool{}
	for _, j := range jobs {
		if j.Array != "" {
			arrays[j.Job] = true
		}
	}
	var rows []*launch.JobState
	for _, j := range jobs {
		if j.ArrayJob == "" || !arrays[j.ArrayJob] {
			rows = append(rows, j)
		}
	}
	return rows
}

// arrayStateText is an array's state with the summary of its tasks:
// "running: 4 tasks: 1 pending, 2 running, 1 done, 0 failed".
func arrayStateText(j *launch.JobState, jobs []*launch.JobState) string {
	return j.State + ": " + launch.ArraySummary(launch.ArrayTasks(jobs, j.Job))
}

// printArray follows printJob for an array: its spec, its tasks' summary,
// the failed ones with their causes, and each task.
func printArray(w io.Writer, j *launch.JobState, jobs []*launch.JobState) {
	tasks := launch.ArrayTasks(jobs, j.Job)
	fmt.Fprintf(w, "array:  %s\ntasks:  %s\n", j.Array, launch.ArraySummary(tasks))
	for _, t := range tasks {
		if t.State == launch.StateFailed || t.State == launch.StateLost {
			fmt.Fprintf(w, "  task %d: %s\n", t.ArrayIndex, stateText(t))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tINDEX\tSTATE\tPID\tSTARTED\tENDED")
	for _, t := range tasks {
		started, ended := "-", "-"
		if t.State != launch.StatePending && t.State != launch.StateSubmitted {
			started = t.Started.Format(time.TimeOnly)
		}
		if !t.Ended.IsZero() {
			ended = t.Ended.Format(time.TimeOnly)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", t.Job, t.ArrayIndex, clipText(stateText(t), 60), pidText(t), started, ended)
	}
	tw.Flush()
	fmt.Fprintf(w, "monarch logs %s_I shows task I's log; its output is in %s\n", j.Job, launch.OutputPath(launch.DefaultStateDir(), j.Job+"_I"))
}
