package main

import (
	"fmt"
	"io"
	"strconv"
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
				for _, j := range jobs {
					if j.Job == want || j.BatchID == want {
						printJob(c.App.Writer, dir, j)
						return nil
					}
				}
				return fmt.Errorf("status: no job %s in %s", want, dir)
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB\tSTATE\tSCHEDULER\tHOSTS\tPROCS\tPID\tSTARTED\tPROGRAM")
			for _, j := range jobs {
				hosts, procs := jobCounts(j)
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", j.Job, stateText(j), j.Scheduler, hosts, procs, pidText(j),
					j.Started.Format(time.DateTime), j.Program)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return printUsage(c.App.Writer, dir)
		},
	}
}

// stateText is a job's state as status shows it.
func stateText(j *launch.JobState) string {
	switch j.State {
	case launch.StateDone, launch.StateFailed:
		return fmt.Sprintf("%s (exit %d)", j.State, j.Exit)
	case launch.StateSubmitted:
		if j.BatchState != "" {
			return j.State + " (" + j.Batch + ": " + j.BatchState + ")"
		}
	}
	return j.State
}

// jobCounts: what is up while the job runs, the most it had once ended.
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

// printJob shows one job in full.
func printJob(w io.Writer, dir string, j *launch.JobState) {
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
	row("program", "%s", j.Program)
	if j.PID > 0 {
		row("pid", "%d on %s", j.PID, j.Host)
	}
	row("hosts", "%d up (most %d)", j.Hosts, j.MaxHosts)
	row("procs", "%d up (most %d)", j.Procs, j.MaxProcs)
	row("started", "%s", j.Started.Format(time.DateTime))
	if !j.Ended.IsZero() {
		row("ended", "%s (after %v)", j.Ended.Format(time.DateTime), j.Ended.Sub(j.Started).Round(time.Second))
	}
	row("record", "%s", jobstate.Path(dir, j.Job))
	row("log", "%s", logagg.LogFiles(dir, j.Job)[0])
	row("system logs", "%s", logagg.SystemLogPath(logagg.SystemLogDir(), j.Job, "*"))
	tw.Flush()
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
			return launch.Stop(c.Context, launch.DefaultStateDir(), c.Args().First(), launch.DefaultGrace)
		},
	}
}
