package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

// monarch stacks asks a running job's client, over the job's control
// socket (internal/jobctl), for the goroutine stacks of its procs, and
// prints identical stacks once with the procs that share them, what each
// proc's actors run and for how long, and the procs that gave none.
func stacksCommand() *cli.Command {
	return &cli.Command{
		Name:      "stacks",
		Usage:     "print the goroutine stacks of a running job's procs (the newest running job's without JOB)",
		ArgsUsage: "[JOB]",
		Description: "Asks the job's client, through its control socket on this host, for the goroutine stacks of\n" +
			"every selected proc, all at once. Goroutines with the same stack (ids, wait times and argument\n" +
			"values aside) are printed once, headed by the procs that have them; then each proc's actors\n" +
			"that run an endpoint now, and since when; then the procs with no stacks: command procs, procs\n" +
			"that ended, procs that did not answer within --timeout. Without --mesh, --rank or --host the\n" +
			"client's own stacks come first.",
		Flags: append(selectionFlags(),
			&cli.DurationFlag{Name: "timeout", Value: actorrt.DefaultStacksTimeout, Usage: "how long to wait for the procs' answers"},
		),
		Action: func(c *cli.Context) error {
			timeout := c.Duration("timeout")
			if timeout <= 0 {
				return fmt.Errorf("stacks: --timeout %v: want a positive duration such as 5s", timeout)
			}
			dir := hostsconfig.StateDir()
			j, err := runningJob(c.Context, "stacks", dir, c.Args().First())
			if err != nil {
				return err
			}
			req := jobctl.StacksRequest{Selection: selection(c), Timeout: timeout}
			ctx, cancel := context.WithTimeout(c.Context, timeout+15*time.Second)
			defer cancel()
			var ans jobctl.StacksAnswer
			path := jobctl.SocketPath(dir, j.Job)
			if err := jobctl.Call(ctx, path, jobctl.OpStacks, req, &ans); err != nil {
				return controlError(c.Context, "stacks", dir, j, path, err)
			}
			return jobctl.Format(c.App.Writer, &ans, time.Now())
		},
	}
}

// selectionFlags are the flags that select a job's procs (see selection).
func selectionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "mesh", Usage: "only the procs of this proc `MESH` (repeat for more)"},
		&cli.IntSliceFlag{Name: "rank", Usage: "only the procs of this `RANK` in their mesh (repeat for more)"},
		&cli.StringSliceFlag{Name: "host", Usage: "only the procs on this `HOST` (repeat for more)"},
	}
}

// selection is the procs c's --mesh, --rank and --host select.
func selection(c *cli.Context) jobctl.Selection {
	return jobctl.Selection{Meshes: c.StringSlice("mesh"), Ranks: c.IntSlice("rank"), Hosts: c.StringSlice("host")}
}

// runningJob finds, for command cmd (stacks, profile, exec), the job of
// ref, or the newest running job for "", and checks that it runs here: cmd
// reaches it through its control socket.
func runningJob(ctx context.Context, cmd, dir, ref string) (*launch.JobState, error) {
	jobs, err := launch.Status(ctx, dir)
	if err != nil {
		return nil, err
	}
	var j *launch.JobState
	if ref != "" {
		if j, err = launch.Find(jobs, dir, ref); err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
	} else {
		for _, cand := range jobs {
			if cand.Active() {
				j = cand
				break
			}
		}
		if j == nil {
			if len(jobs) == 0 {
				return nil, fmt.Errorf("%s: no job runs: there are no jobs in %s", cmd, dir)
			}
			return nil, fmt.Errorf("%s: no job runs; the newest, %s, ended (%s): monarch logs %[2]s shows its output", cmd, jobs[0].Job, stateText(jobs[0]))
		}
	}
	if !j.Active() {
		return nil, endedError(cmd, j)
	}
	if host, _ := os.Hostname(); j.Host != "" && host != "" && j.Host != host {
		return nil, fmt.Errorf("%s: job %s runs from host %s: run monarch %[1]s there (its control socket is on that host)", cmd, j.Job, j.Host)
	}
	return j, nil
}

func endedError(cmd string, j *launch.JobState) error {
	return fmt.Errorf("%s: job %s has ended (%s): monarch logs %[2]s shows its output", cmd, j.Job, stateText(j))
}

// controlError explains a failed call of cmd on the job's control
// socket: the job may have ended meanwhile, or its client not serve the
// socket (yet).
func controlError(ctx context.Context, cmd, dir string, j *launch.JobState, path string, err error) error {
	if !errors.Is(err, jobctl.ErrNotServing) {
		return fmt.Errorf("%s: job %s: %w", cmd, j.Job, err)
	}
	if jobs, serr := launch.Status(ctx, dir); serr == nil {
		if now, ferr := launch.Find(jobs, dir, j.Job); ferr == nil && !now.Active() {
			return endedError(cmd, now)
		}
	}
	return fmt.Errorf("%s: job %s is %s but its client serves no control socket at %s "+
		"(it may still be starting, or be built with an older monarch)", cmd, j.Job, stateText(j), path)
}
