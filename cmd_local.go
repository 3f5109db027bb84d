package main

import (
	"errors"
	"os"
	"strings"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

func localCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "local",
		Usage:     "run a program built with the monarch SDK, or a job file, on this machine",
		ArgsUsage: "[--hosts N] (JOB.toml | -- PROGRAM [ARGS...])",
		Description: "Starts the job's bus on loopback, runs the program as the job's client and exits with its\n" +
			"status. With --hosts N, starts N simulated hosts (host agents on this machine) that\n" +
			"actorrt.HostsFromConfig returns. Ctrl-C stops the program and all its procs.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "hosts", Usage: "simulated hosts to start (default: none for a program, the job's local hosts for a job file)"},
		},
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) == 0 {
				return errors.New("local: no program given (usage: monarch local [--hosts N] (JOB.toml | -- PROGRAM [ARGS...]))")
			}
			nhosts := c.Int("hosts")
			if nhosts < 0 {
				return errors.New("local: --hosts must be at least 1")
			}
			var cfg launch.RunConfig
			if len(args) == 1 && strings.HasSuffix(args[0], ".toml") && c.Args().Len() == 1 && !afterDashes() {
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
		},
	}
}

// afterDashes reports whether the command line separated a program with
// "--": then a lone argument ending in .toml is still a program.
func afterDashes() bool {
	for _, a := range os.Args {
		if a == "--" {
			return true
		}
	}
	return false
}
