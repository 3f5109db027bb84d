package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

// monarch dashboard prints the address of a running job's dashboard,
// with the job's token: its client answers over the job's control socket.
func dashboardCommand() *cli.Command {
	return &cli.Command{
		Name:      "dashboard",
		Usage:     "print the address of a running job's live dashboard, with its token (the newest running job's without JOB)",
		ArgsUsage: "[JOB]",
		Description: "Asks the job's client, through its control socket on this host, where it serves the job's\n" +
			"dashboard, and prints the URL to open: it carries the job's token, which the dashboard needs\n" +
			"(whoever has it sees the job). A job whose dashboard is turned off says where.",
		Action: func(c *cli.Context) error {
			dir := hostsconfig.StateDir()
			j, err := runningJob(c.Context, "dashboard", dir, c.Args().First())
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
			defer cancel()
			path := jobctl.SocketPath(dir, j.Job)
			var ans jobctl.DashboardAnswer
			if err := jobctl.Call(ctx, path, jobctl.OpDashboard, struct{}{}, &ans); err != nil {
				return controlError(c.Context, "dashboard", dir, j, path, err)
			}
			if ans.URL == "" {
				return fmt.Errorf("dashboard: job %s has no dashboard: %s", j.Job, ans.Off)
			}
			fmt.Fprintln(c.App.Writer, ans.URL)
			return nil
		},
	}
}

// dashboardText is what status shows of a running job's dashboard: its
// URL, or why it has none; "" when its client cannot be asked (it runs
// on another host, has not started its socket, or does not answer
// within a second).
func dashboardText(ctx context.Context, dir string, j *launch.JobState) string {
	if host, _ := os.Hostname(); !j.Active() || j.Host != "" && j.Host != host {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var ans jobctl.DashboardAnswer
	if err := jobctl.Call(ctx, jobctl.SocketPath(dir, j.Job), jobctl.OpDashboard, struct{}{}, &ans); err != nil {
		return ""
	}
	if ans.URL == "" {
		return "none: " + ans.Off
	}
	return ans.URL
}
