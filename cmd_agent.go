package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

// agentCommand is what the launchers start on every host; users do not
// run it, so it is hidden from help.
func agentCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "agent",
		Hidden:    true,
		Usage:     "serve as a job's host agent (started by monarch run)",
		ArgsUsage: "-- [PROGRAM ARGS...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "job", Usage: "the job's `ID` (required)"},
			&cli.IntFlag{Name: "index", Value: -1, Usage: "this host's `INDEX` in the job", DefaultText: "none", Action: atLeast("index", 0, "")},
			&cli.BoolFlag{Name: "slurm", Usage: "take the index from the Slurm step (node name in the job's node list)"},
			&cli.StringFlag{Name: "program", Usage: "the job's `PROGRAM`, run in worker mode for each proc (required)"},
			&cli.StringFlag{Name: "dir", Usage: "working `DIR` of the procs"},
			&cli.StringSliceFlag{Name: "env", Usage: "`KEY=VALUE` for the procs (repeatable)"},
			&cli.BoolFlag{Name: "token-stdin", Usage: "read the job secret from the first line of stdin, and exit at EOF"},
		},
		Action: func(c *cli.Context) error {
			// Checked here rather than with Required, whose error prints
			// the whole help.
			for _, name := range []string{"job", "program"} {
				if c.String(name) == "" {
					return usagef(c, "--%s is required", name)
				}
			}
			cfg := actorrt.AgentConfig{
				Job: c.String("job"), Index: c.Int("index"), BusURL: os.Getenv(bus.EnvURL),
				Program: c.String("program"), Args: c.Args().Slice(), Dir: c.String("dir"), Env: c.StringSlice("env"),
			}
			if c.Bool("slurm") {
				i, err := slurmIndex()
				if err != nil {
					return err
				}
				cfg.Index = i
			}
			if c.Bool("token-stdin") {
				r := bufio.NewReader(os.Stdin)
				line, err := r.ReadString('\n')
				if err != nil {
					return fmt.Errorf("agent: read the job secret from stdin: %w", err)
				}
				cfg.Token, cfg.Stdin = strings.TrimSpace(line), r
			} else {
				cfg.Token = os.Getenv(bus.EnvToken)
				os.Unsetenv(bus.EnvToken)
			}
			a.code = actorrt.RunAgent(c.Context, cfg)
			return nil
		},
	}
}

// slurmIndex finds this node in the job's node list: the step's own
// SLURM_NODEID is relative to the step, the job's list is what every
// agent agrees on.
func slurmIndex() (int, error) {
	name := os.Getenv("SLURMD_NODENAME")
	nodes, err := launch.ExpandHostlist(os.Getenv("SLURM_JOB_NODELIST"))
	if err == nil && name != "" {
		for i, n := range nodes {
			if n == name {
				return i, nil
			}
		}
	}
	if id, err := strconv.Atoi(os.Getenv("SLURM_NODEID")); err == nil {
		return id, nil
	}
	return 0, errors.New("agent: --slurm outside a Slurm step (no SLURMD_NODENAME in SLURM_JOB_NODELIST, no SLURM_NODEID)")
}
