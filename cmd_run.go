package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

func runCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a job on the hosts of its " + jobenv.HostsVar + " file (Slurm, ssh or local)",
		ArgsUsage: "JOB.toml",
		Description: "Reads the job file, starts the job's bus and a host agent on every host (one srun step in a\n" +
			"Slurm allocation, salloc first outside one; one ssh session per host; or local processes),\n" +
			"runs the job's program as the client and exits with its status. The hosts file is the job's\n" +
			"`hosts`, else $" + jobenv.HostsVar + "; with neither the job runs on this machine.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "detach", Usage: "submit the job with sbatch and print its Slurm job id (Slurm only)"},
		},
		Action: func(c *cli.Context) error {
			// One argument: prepare checks the count ArgsUsage shows.
			cfg, err := loadRun(c.Args().First())
			if err != nil {
				return err
			}
			cfg.Detach = c.Bool("detach")
			cfg.Stdout, cfg.Stderr, cfg.Progress = c.App.Writer, c.App.ErrWriter, c.App.ErrWriter
			code, err := launch.Run(c.Context, cfg)
			a.code = code
			return err
		},
	}
}

// loadRun reads a job file and the hosts it runs on.
func loadRun(path string) (launch.RunConfig, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return launch.RunConfig{}, err
	}
	job, err := hostsconfig.LoadJob(path) // errors name the file as the user did
	if err != nil {
		return launch.RunConfig{}, err
	}
	cfg := launch.RunConfig{Job: job, JobPath: abs, Hosts: job.Hosts}
	if cfg.Hosts == nil {
		if p := os.Getenv(jobenv.HostsVar); p != "" {
			if cfg.Hosts, err = hostsconfig.LoadHosts(p); err != nil {
				return launch.RunConfig{}, fmt.Errorf("$%s: %w", jobenv.HostsVar, err)
			}
		}
	}
	if cfg.Hosts != nil {
		cfg.HostsPath = cfg.Hosts.Path
	}
	return cfg, nil
}
