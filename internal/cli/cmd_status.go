package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/launch"
	"github.com/monarch-go/monarch/logagg"
	"github.com/urfave/cli/v2"
)

// monarch status lists the job store: every job a launcher ran and every
// program run directly, with its state, the hosts and procs up now (for a
// job that has ended: the most it had), its process, and, in a footer,
// the space the store takes. With a job id it shows that job in full,
// with the paths of its record and log.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "list this user's jobs (or one) with hosts, procs and state",
		ArgsUsage: "[JOB]",
		Action: func(c *cli.Context) error {
			dir := launch.DefaultStateDir()
			jobs, err := launch.Status(c.Context, dir)
			if err != nil {
				return err
			}
			if want := c.Args().First(); want != "" {
				j, err := launch.Find(jobs, dir, want)
				if err != nil {
					return fmt.Errorf("status: %w", err)
				}
				printJob(c.App.Writer, dir, j, dashboardText(c.Context, dir, j))
				if j.Array != "" {
					printArray(c.App.Writer, j, jobs)
				}
				return nil
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB\tSTATE\tSCHEDULER\tHOSTS\tPROCS\tPID\tSTARTED\tPROGRAM")
			for _, j := range listedJobs(jobs) {
				hosts, procs := jobCounts(j)
				state := clipText(stateText(j), 60)
				if j.Array != "" {
					state = clipText(arrayStateText(j, jobs), 90)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", j.Job, state, schedulerText(j), hosts, procs, pidText(j),
					j.Started.Format(time.DateTime), j.Program)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return printUsage(c.App.Writer, dir)
		},
	}
}

// stateText is a job's state as status shows it: how it ended, in
// words, once it has; what its scheduler's queue says while it waits
// there; and the run, when the scheduler ran it again.
func stateText(j *launch.JobState) string {
	text := j.State
	switch {
	case j.State == launch.StateFailed && strings.HasPrefix(j.End, "failed"):
		text = j.End
		if j.Exit != 0 && !strings.HasPrefix(j.End, "failed (exit") {
			text += fmt.Sprintf(" (exit %d)", j.Exit)
		}
	case j.State == launch.StateFailed || j.State == launch.StateDone && j.Exit != 0:
		text = fmt.Sprintf("%s (exit %d)", j.State, j.Exit)
	case j.End != "" && j.End != launch.StateDone:
		text = j.End
		if j.State == launch.StateLost && !strings.HasPrefix(j.End, "lost") {
			text = "lost: " + j.End
		}
	case j.State == launch.StatePending && len(j.After) > 0:
		text = "pending (" + launch.AfterText(j.After) + ")"
	case j.State == launch.StateSubmitted && j.BatchState != "":
		text = j.BatchState // pending (Resources), running: its launcher starts
	}
	if j.Restarts > 0 && j.Active() {
		text += fmt.Sprintf(" (run %d)", j.Restarts+1)
	}
	if n := len(j.SPMDRestarts); n > 0 {
		last := j.SPMDRestarts[n-1]
		if j.Active() {
			text += fmt.Sprintf(" (restart %d of %d)", last.Restart, last.MaxRestarts)
		} else {
			text += " (" + spmdRestartsText(last.Restart) + ")"
		}
	}
	return text
}

// spmdRestartsText is "1 restart", "2 restarts": an SPMD job's gang
// restarts.
func spmdRestartsText(n int) string {
	if n == 1 {
		return "1 restart"
	}
	return fmt.Sprintf("%d restarts", n)
}

// schedulerText is the scheduler a job runs on, with its batch job's id
// there: "slurm 8".
func schedulerText(j *launch.JobState) string {
	if j.BatchID != "" {
		return j.Scheduler + " " + j.BatchID
	}
	return j.Scheduler
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// jobCounts: what is up while the job runs, how many came up once ended.
func jobCounts(j *launch.JobState) (hosts, procs int) {
	if j.Active() {
		return j.Hosts, j.Procs
	}
	return j.MaxHosts, j.MaxProcs
}

func pidText(j *launch.JobState) string {
	if j.PID <= 0 {
		return "-"
	}
	return strconv.Itoa(j.PID)
}

// printJob shows one job in full; dashboard is its dashboard's URL, or
// "" to say nothing of it.
func printJob(w io.Writer, dir string, j *launch.JobState, dashboard string) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{k}, args...)...)
	}
	row("job", "%s", j.Job)
	row("state", "%s", stateText(j))
	row("scheduler", "%s", j.Scheduler)
	if j.BatchID != "" {
		row(j.Batch+" job", "%s", j.BatchID)
	}
	if j.Restarts > 0 {
		row("runs", "%d (the scheduler ran it again %d times)", j.Restarts+1, j.Restarts)
	}
	if n := len(j.SPMDRestarts); n > 0 {
		last := j.SPMDRestarts[n-1]
		row("restarts", "%d of at most %d (every rank started again after one failed or a host was lost)", last.Restart, last.MaxRestarts)
		for _, r := range j.SPMDRestarts {
			fmt.Fprintf(tw, "\trestart %d at %s: %s\n", r.Restart, r.Time.Format(time.TimeOnly), r.Summary)
		}
	}
	row("program", "%s", j.Program)
	if j.ArrayJob != "" {
		row("array", "task %d of %s", j.ArrayIndex, j.ArrayJob)
	}
	if len(j.After) > 0 {
		row("waits for", "%s", launch.AfterText(j.After))
	}
	if j.PID > 0 {
		row("pid", "%d on %s", j.PID, j.Host)
	}
	array := j.Array != "" // its tasks have the hosts, procs and logs
	if !array {
		row("hosts", "%d up (%d came up)", j.Hosts, j.MaxHosts)
		row("procs", "%d up (%d came up)", j.Procs, j.MaxProcs)
	}
	row("started", "%s", j.Started.Format(time.DateTime))
	if !j.Ended.IsZero() {
		row("ended", "%s (after %v)", j.Ended.Format(time.DateTime), j.Ended.Sub(j.Started).Round(time.Second))
	}
	if f := j.Failure; f != nil {
		row("failed", "%s", f.Summary)
		if f.Rank >= 0 && (f.Mesh != "" || f.Host != "") {
			row("member", "%s", memberText(f))
		}
		if f.Signal != "" {
			row("signal", "%s", f.Signal)
		} else if f.Exit != 0 {
			row("exit status", "%d", f.Exit)
		}
	}
	if dashboard != "" {
		row("dashboard", "%s", dashboard)
	}
	row("record", "%s", jobstate.Path(dir, j.Job))
	if !array {
		row("log", "%s", logagg.LogFiles(dir, j.Job)[0])
	}
	if j.Output != "" {
		row("output", "%s (the launcher's own)", j.Output)
	}
	if !array {
		row("system logs", "%s", logagg.SystemLogPath(logagg.SystemLogDir(), j.Job, "*"))
	}
	tw.Flush()
	if f := j.Failure; f != nil && len(f.Tail) > 0 {
		fmt.Fprintf(w, "last lines of its stderr:\n")
		for _, l := range f.Tail {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// memberText names the member that failed: rank 3 of mesh trainer on h2.
func memberText(f *jobstate.Failure) string {
	text := fmt.Sprintf("rank %d", f.Rank)
	if f.Mesh != "" {
		text += " of mesh " + f.Mesh
	}
	if f.Host != "" {
		text += " on " + f.Host
	}
	return text
}

// printUsage is the footer: the space the job store takes.
func printUsage(w io.Writer, dir string) error {
	jobs, bytes, err := jobstate.Usage(dir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "job store %s: %d jobs, %s (monarch clean removes ended jobs)\n", dir, jobs, sizeText(bytes))
	return err
}

// sizeText writes a size in bytes for people: 512 B, 3.4 KiB, 12.0 MiB.
func sizeText(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := "KMGTPE"
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop a job (its launcher tears down every host and proc)",
		ArgsUsage: "JOB",
		Action: func(c *cli.Context) error {
			dir, ref := launch.DefaultStateDir(), c.Args().First()
			if j := findJob(c.Context, dir, ref); j != nil && !j.Active() {
				return fmt.Errorf("stop %s: job %s had already ended: %s", ref, j.Job, endText(j))
			}
			if err := launch.Stop(c.Context, dir, ref, launch.DefaultGrace); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, stoppedText(findJob(c.Context, dir, ref), ref))
			return nil
		},
	}
}

// findJob is the record of the job ref names, or nil if there is none
// (launch.Stop then says why).
func findJob(ctx context.Context, dir, ref string) *launch.JobState {
	jobs, err := launch.Status(ctx, dir)
	if err != nil {
		return nil
	}
	j, _ := launch.Find(jobs, dir, ref)
	return j
}

// stoppedText says what monarch stop did to j, read again after the
// stop: how it ended, or, for a batch job whose scheduler was asked to
// cancel it, that it was asked.
func stoppedText(j *launch.JobState, ref string) string {
	switch {
	case j == nil:
		return "stopped job " + ref
	case j.Active() && j.Array != "":
		return fmt.Sprintf("asked %s to cancel array %s (batch array %s); monarch status %[2]s shows how its tasks end", j.Batch, j.Job, j.BatchID)
	case j.Active():
		return fmt.Sprintf("asked %s to stop job %s (batch job %s); monarch status %s shows how it ends", j.Batch, j.Job, j.BatchID, j.Job)
	case j.Array != "":
		return fmt.Sprintf("stopped array %s: %s", j.Job, j.End) // its tasks' summary
	case j.End == stoppedByStop:
		return fmt.Sprintf("stopped job %s: %s", j.Job, strings.Join(endDetails(j), ", "))
	case strings.HasPrefix(j.End, stoppedByStop+" "): // "... before it ran": no procs, no client
		return fmt.Sprintf("stopped job %s%s", j.Job, strings.TrimPrefix(j.End, stoppedByStop))
	}
	return fmt.Sprintf("job %s ended: %s", j.Job, endText(j))
}

// stoppedByStop is the End of a job monarch stop ended.
const stoppedByStop = "stopped by monarch stop"

// endText is how an ended job ended, as its record says: "stopped by
// monarch stop, 4 procs ended, the client exited 143 at 2026-12-07
// 03:10:00".
func endText(j *launch.JobState) string {
	return strings.Join(append([]string{stateText(j)}, endDetails(j)...), ", ")
}

// endDetails are the facts of an ended job's record after its state: its
// procs, its client's exit status and when.
func endDetails(j *launch.JobState) []string {
	var out []string
	if _, procs := jobCounts(j); procs > 0 {
		out = append(out, fmt.Sprintf("%d %s ended", procs, plural("proc", procs)))
	}
	exited := fmt.Sprintf("the client exited %d", j.Exit)
	if !j.Ended.IsZero() {
		exited += " at " + j.Ended.Format(time.DateTime)
	}
	return append(out, exited)
}
