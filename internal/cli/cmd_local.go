package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

func localCommand(a *app) *cli.Command {
	cmd := &cli.Command{
		Name:      "local",
		Usage:     "run a program built with the monarch SDK, a command on every proc (--procs), or a job file, on this machine",
		ArgsUsage: "(JOB.toml [options] | [--] PROGRAM [ARGS...])",
		Description: "Starts the job's bus on loopback, runs the program as the job's client and exits with its\n" +
			"status. With --hosts N, starts N simulated hosts (host agents on this machine) that\n" +
			"actorrt.HostsFromConfig returns. Ctrl-C stops the program and all its procs.\n" +
			"\n" +
			"monarch's options come before PROGRAM, or before or after JOB.toml; every argument after\n" +
			"PROGRAM is the program's, flags included. A lone argument ending in .toml is a job file,\n" +
			"unless it follows -- (monarch local -- ./setup.toml runs a program of that name).\n" +
			"\n" +
			"With --procs, PROGRAM is any command, run once per proc with the torchrun variables (RANK,\n" +
			"WORLD_SIZE, MASTER_ADDR, ...): monarch local --procs gpus=4 -- python3 train.py. The first\n" +
			"proc to exit non-zero stops the others; monarch exits with its status. --max-restarts N then\n" +
			"starts every proc again, with a new MASTER_PORT, up to N times (torchrun's --max-restarts).\n" +
			"--nnodes MIN:MAX runs the procs on at most MAX of the hosts and, when hosts are lost, starts\n" +
			"them again on those left, down to MIN, renumbered (torchrun's elastic --nnodes); each such\n" +
			"restart counts against --max-restarts, as under torchrun.\n" +
			"\n" +
			"--after-ok ID (--after, --after-any) waits for job ID first, as monarch run does.\n" +
			"With --array SPEC (0-15, 1,3,7, 0-15:2, %N for at most N at once) the job runs as an array of\n" +
			"tasks, each with MONARCH_ARRAY_INDEX, its output in the job store's ID_I.out.",
		Flags: append(runFlags("leave the job to run in the background; print its id"),
			&cli.IntFlag{Name: "hosts", Usage: "start `N` simulated hosts", Action: atLeast("hosts", 1, "simulated hosts"),
				DefaultText: "none for a program; for a job file, the local hosts of its hosts file"},
			&cli.StringFlag{Name: "procs", Usage: "run PROGRAM on `DIMS` procs per host, such as gpus=4 or nodes=2,gpus=4 (an SPMD job)"},
			&cli.IntFlag{Name: "max-restarts", Usage: "an SPMD job: when a rank fails, stop the others and start every rank again, at most `N` times", Action: atLeast("max-restarts", 0, ""),
				DefaultText: "0; for a job file, its [spmd] max_restarts"},
			&cli.StringFlag{Name: "nnodes", Usage: "an SPMD job: run on at most MAX hosts, and go on with those left, down to MIN, when hosts are lost (`MIN:MAX`, or N)",
				DefaultText: "every host; for a job file, its [spmd] nnodes"},
		),
	}
	a.programArgs[cmd] = func(arg string) bool { return !isJobFile(arg) }
	cmd.Action = func(c *cli.Context) error {
		args := c.Args().Slice()
		if len(args) == 0 {
			return usagef(c, "no job file or program given")
		}
		nhosts := c.Int("hosts")
		var cfg launch.RunConfig
		// The command line that runs the job again, detached.
		rerun := []string{"local"}
		if c.IsSet("hosts") {
			rerun = append(rerun, "--hosts="+strconv.Itoa(nhosts))
		}
		var rest []string
		if isJobFile(args[0]) && !a.dashed {
			if len(args) > 1 {
				return usagef(c, "a job file takes no arguments, got %s (a program named %s: monarch local -- %[2]s ARGS...)",
					quoteAll(args[1:]), args[0])
			}
			var err error
			if cfg, err = loadRun(args[0]); err != nil {
				return err
			}
			rest = []string{cfg.JobPath}
			if nhosts == 0 {
				nhosts = 1
				if h := cfg.Hosts; h != nil && h.Scheduler == hostsconfig.SchedulerLocal && h.Local != nil {
					nhosts = h.Local.Hosts
				}
			}
		} else if c.IsSet("procs") {
			dims, err := parseDims(c.String("procs"))
			if err != nil {
				return usagef(c, "--procs: %v", err)
			}
			if cfg.Job, err = launch.LocalSPMDJob(args, dims); err != nil {
				return err
			}
			rerun = append(rerun, "--procs="+c.String("procs"))
			rest = append([]string{"--"}, args...)
		} else {
			job, err := launch.LocalJob(args[0], args[1:])
			if err != nil {
				return err
			}
			cfg.Job = job
			rest = append([]string{"--", job.Program}, args[1:]...)
		}
		if c.IsSet("max-restarts") {
			if cfg.Job == nil || cfg.Job.SPMD == nil {
				return usagef(c, "--max-restarts restarts the ranks of an SPMD job: give --procs, or a job file with [spmd]")
			}
			cfg.Job.SPMD.MaxRestarts = c.Int("max-restarts")
			rerun = append(rerun, "--max-restarts="+strconv.Itoa(cfg.Job.SPMD.MaxRestarts))
		}
		if c.IsSet("nnodes") {
			if cfg.Job == nil || cfg.Job.SPMD == nil {
				return usagef(c, "--nnodes sets the hosts of an SPMD job: give --procs, or a job file with [spmd]")
			}
			sp := cfg.Job.SPMD
			var err error
			if sp.MinHosts, sp.MaxHosts, err = hostsconfig.ParseNNodes(c.String("nnodes")); err != nil {
				return usagef(c, "--nnodes: %v", err)
			}
			rerun = append(rerun, "--nnodes="+c.String("nnodes"))
		}
		if sp := cfg.Job.SPMD; sp != nil && sp.MaxHosts > max(nhosts, 1) {
			return usagef(c, "nnodes %d:%d: MAX is more than the %d hosts of the job (--hosts)", sp.MinHosts, sp.MaxHosts, max(nhosts, 1))
		}
		if err := arrayOptions(c, &cfg, &rerun); err != nil {
			return err
		}
		if err := detachOptions(c, &cfg, rerun, rest...); err != nil {
			return err
		}
		if err := taskOptions(c, &cfg); err != nil {
			return err
		}
		// This machine, as nhosts simulated hosts whatever the file says,
		// or, for a program without --hosts, just its ThisHost(ctx).
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

// parseDims reads dimensions written name=size, separated by commas, in
// order: gpus=4, or nodes=2,gpus=4.
func parseDims(s string) ([]hostsconfig.Dim, error) {
	var dims []hostsconfig.Dim
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(size)
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("%q: want NAME=SIZE, such as gpus=4", part)
		case !validDimName(name):
			return nil, fmt.Errorf("%q: a dimension name is letters, digits, '_' and '-'", name)
		case err != nil || n < 1:
			return nil, fmt.Errorf("%q: want a size of at least 1", part)
		case seen[name]:
			return nil, fmt.Errorf("dimension %q given twice", name)
		}
		seen[name] = true
		dims = append(dims, hostsconfig.Dim{Name: name, Size: n})
	}
	return dims, nil
}

func validDimName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}

// isJobFile: an argument of monarch local that names a job file rather
// than a program.
func isJobFile(arg string) bool { return strings.HasSuffix(arg, ".toml") }
