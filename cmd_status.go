package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "list this user's jobs (or one) with hosts, procs and state",
		ArgsUsage: "[JOB]",
		Action: func(c *cli.Context) error {
			dir := launch.DefaultStateDir()
			jobs, err := launch.Status(dir)
			if err != nil {
				return err
			}
			want := c.Args().First()
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB\tSTATE\tSCHEDULER\tHOSTS\tPROCS\tSTARTED\tPROGRAM")
			found := false
			for _, j := range jobs {
				if want != "" && j.Job != want && j.SlurmJob != want {
					continue
				}
				found = true
				state := j.State
				if state == launch.StateDone || state == launch.StateFailed {
					state = fmt.Sprintf("%s (exit %d)", state, j.Exit)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", j.Job, state, j.Scheduler, j.Hosts, j.Procs,
					j.Started.Format(time.DateTime), j.Program)
			}
			if want != "" && !found {
				return fmt.Errorf("status: no job %s in %s", want, dir)
			}
			return w.Flush()
		},
	}
}

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop a job (its launcher tears down every host and proc)",
		ArgsUsage: "JOB",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("stop: want one job id (see monarch status)")
			}
			return launch.Stop(launch.DefaultStateDir(), c.Args().First(), launch.DefaultGrace)
		},
	}
}
