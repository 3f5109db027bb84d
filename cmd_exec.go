package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/urfave/cli/v2"
)

// monarch exec runs a command on hosts of a running job, through the
// job's client (its control socket, internal/jobctl) and the host agents
// (see internal/jobview's exec.go): the output of each host is printed as it
// comes, each line prefixed by the host, and then how the command ended
// on each; monarch exec exits with the worst status.
func execCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command on the hosts of a running job (the newest running job's without JOB)",
		ArgsUsage: "[JOB] (--host H | --all) [--timeout D] -- COMMAND [ARGS...]",
		Description: "Asks the job's client, through its control socket on this host, to run COMMAND on the\n" +
			"job's hosts through their host agents: those a launcher started (h0, h1, ... under\n" +
			"monarch local --hosts N; the nodes under Slurm or ssh) and the client's own host, named as\n" +
			"monarch stacks --host and the log lines name them. The command runs as the job's user in\n" +
			"the job's directory, with the agent's environment less the job's variables (no bus, no\n" +
			"secret) plus the job file's [env]; it is not a proc of the job. Its stdout and stderr come\n" +
			"back as they are written, each line prefixed by its host ([h0] ...); then one line a host\n" +
			"on stderr says how it ended. monarch exec exits with the highest status (0 when the\n" +
			"command succeeded everywhere). Ctrl-C (or SIGTERM) stops the commands on every host:\n" +
			"SIGTERM to each command's process group, SIGKILL after --grace; monarch exec then exits\n" +
			"130 (143). A job file with [exec] enabled = false refuses it.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "host", Usage: "run on this `HOST` of the job (repeat for more)"},
			&cli.BoolFlag{Name: "all", Usage: "run on every host of the job"},
			&cli.DurationFlag{Name: "timeout", Usage: "stop the commands after `D`", DefaultText: "10m, the longest a command may run"},
			&cli.DurationFlag{Name: "grace", Value: jobctl.DefaultExecGrace, Usage: "how long a stopped command has between SIGTERM and SIGKILL"},
		},
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			ref := ""
			if !a.dashed && len(args) > 0 {
				ref, args = args[0], args[1:]
			}
			if len(args) > 0 && args[0] == "--" { // after JOB, the parser leaves it
				args = args[1:]
			}
			hosts, all := c.StringSlice("host"), c.Bool("all")
			timeout, grace := c.Duration("timeout"), c.Duration("grace")
			switch {
			case len(args) == 0 || args[0] == "":
				return usagef(c, "no command to run: monarch exec JOB --all -- COMMAND [ARGS...]")
			case len(hosts) == 0 && !all:
				return usagef(c, "say where to run %s: --host H (repeat for more) or --all (every host of the job)", args[0])
			case len(hosts) > 0 && all:
				return usagef(c, "--host and --all: give one of them")
			case timeout < 0 || c.IsSet("timeout") && timeout == 0:
				return usagef(c, "--timeout %v: want a positive duration such as 30s", timeout)
			case timeout > jobctl.MaxOpTime:
				return usagef(c, "--timeout %v: at most %v", timeout, jobctl.MaxOpTime)
			case grace <= 0 || grace > time.Hour:
				return usagef(c, "--grace %v: want a positive duration of at most 1h, such as 5s", grace)
			}
			dir := hostsconfig.StateDir()
			j, err := runningJob(c.Context, "exec", dir, ref)
			if err != nil {
				return err
			}

			// Ctrl-C, SIGTERM or SIGHUP asks the job's client to stop the
			// commands; their ends are still awaited (bounded) and shown.
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer signal.Stop(sigs)
			bound := timeout
			if bound == 0 {
				bound = jobctl.MaxOpTime
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Context), bound+jobctl.ExecStopBound(grace)+jobctl.IOTimeout)
			defer cancel()
			stop := make(chan struct{})
			var signalled os.Signal
			sigDone := make(chan struct{})
			defer close(sigDone)
			go func() {
				select {
				case sig := <-sigs:
					signalled = sig
					close(stop)
					// The client answers once the commands have ended or
					// their stop bound has passed; past that, give up.
					time.AfterFunc(jobctl.ExecStopBound(grace)+jobctl.IOTimeout, cancel)
				case <-sigDone:
				}
			}()

			out := &jobctl.ExecOutput{Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
			req := jobctl.ExecRequest{Hosts: hosts, All: all, Argv: args, Timeout: timeout, Grace: grace}
			var ans jobctl.ExecAnswer
			path := jobctl.SocketPath(dir, j.Job)
			err = jobctl.CallStream(ctx, path, jobctl.OpExec, req, stop, func(raw json.RawMessage) error {
				var ev jobctl.ExecEvent
				if err := json.Unmarshal(raw, &ev); err != nil {
					return fmt.Errorf("exec: an event from the job's client: %w", err)
				}
				out.Write(ev)
				return nil
			}, &ans)
			out.Flush()
			code := 0
			if err != nil {
				err = controlError(c.Context, "exec", dir, j, path, err)
			} else {
				ans.PrintStatus(c.App.ErrWriter)
				code = ans.ExitCode()
			}
			select {
			case <-stop:
				code = 128 + int(signalled.(syscall.Signal))
			default:
			}
			if err != nil && code == 0 {
				return err
			}
			if err != nil { // stopped, and then the call failed: the signal's status
				fmt.Fprintln(c.App.ErrWriter, "monarch:", err)
			}
			a.code = code
			return nil
		},
	}
}
