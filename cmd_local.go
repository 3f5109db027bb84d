package main

import (
	"strings"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

func localCommand(a *app) *cli.Command {
	cmd := &cli.Command{
		Name:      "local",
		Usage:     "run a program built with the monarch SDK, or a job file, on this machine",
		ArgsUsage: "(JOB.toml [options] | [--] PROGRAM [ARGS...])",
		Description: "Starts the job's bus on loopback, runs the program as the job's client and exits with its\n" +
			"status. With --hosts N, starts N simulated hosts (host agents on this machine) that\n" +
			"actorrt.HostsFromConfig returns. Ctrl-C stops the program and all its procs.\n" +
			"\n" +
			"monarch's options come before PROGRAM, or before or after JOB.toml; every argument after\n" +
			"PROGRAM is the program's, flags included. A lone argument ending in .toml is a job file,\n" +
			"unless it follows -- (monarch local -- ./setup.toml runs a program of that name).",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "hosts", Usage: "start `N` simulated hosts", Action: atLeast("hosts", 1, "simulated hosts"),
				DefaultText: "none for a program; for a job file, the local hosts of its hosts file"},
		},
	}
	a.programArgs[cmd] = func(arg string) bool { return !isJobFile(arg) }
	cmd.Action = func(c *cli.Context) error {
		args := c.Args().Slice()
		if len(args) == 0 {
			return usagef(c, "no job file or program given")
		}
		nhosts := c.Int("hosts")
		var cfg launch.RunConfig
		if isJobFile(args[0]) && !a.dashed {
			if len(args) > 1 {
				return usagef(c, "a job file takes no arguments, got %s (a program named %s: monarch local -- %[2]s ARGS...)",
					quoteAll(args[1:]), args[0])
			}
			var err error
			if cfg, err = loadRun(args[0]); err != nil {
				return err
			}
			if nhosts == 0 {
				nhosts = 1
				if h := cfg.Hosts; h != nil && h.Scheduler == hostsconfig.SchedulerLocal && h.Local != nil {
					nhosts = h.Local.Hosts
				}
			}
		} else {
			job, err := launch.LocalJob(args[0], args[1:])
			if err != nil {
				return err
			}
			cfg.Job = job
		}
		// This machine, as nhosts simulated hosts whatever the file says,
		// or, for a program without --hosts, just its ThisHost().
		cfg.Hosts = nil
		if nhosts > 0 {
			cfg.Hosts = &hostsconfig.Hosts{Scheduler: hostsconfig.SchedulerLocal, Local: &hostsconfig.Local{Hosts: nhosts}}
		}
		cfg.Stdout, cfg.Stderr, cfg.Progress = c.App.Writer, c.App.ErrWriter, c.App.ErrWriter
		code, err := launch.Run(c.Context, cfg)
		a.code = code
		return err
	}
	return cmd
}

// isJobFile: an argument of monarch local that names a job file rather
// than a program.
func isJobFile(arg string) bool { return strings.HasSuffix(arg, ".toml") }
