package cli

import (
	"context"
	"encoding/json"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/spmd"
	"github.com/urfave/cli/v2"
)

// spmdCommand is the client of an SPMD job, which the launcher starts
// (monarch run of a job with [spmd], monarch local --procs); users do not
// run it, so it is hidden from help. It runs the command on every proc
// of the job and exits with the first failing proc's status. Signals are
// the SDK client's to handle (actorrt.Run), not tearsDown's.
func spmdCommand(a *app) *cli.Command {
	cmd := &cli.Command{
		Name:      "spmd",
		Hidden:    true,
		Usage:     "run a command on every proc of the job (the client of an SPMD job)",
		ArgsUsage: "[--gpus-dim DIM] [--notice-signal SIG] [--max-restarts N] [--nnodes MIN:MAX] -- COMMAND [ARGS...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "gpus-dim", Value: "gpus", Usage: "the dimension whose index is CUDA_VISIBLE_DEVICES"},
			&cli.StringFlag{Name: "notice-signal", Value: "USR1", Usage: "the signal ranks that catch it get when the job is about to end: USR1, USR2, TERM, INT, HUP or none"},
			&cli.IntFlag{Name: "max-restarts", Usage: "restart every rank, at most `N` times, when one fails", Action: atLeast("max-restarts", 0, "")},
			&cli.StringFlag{Name: "nnodes", Usage: "run on at most MAX hosts; go on with those left, down to MIN, when hosts are lost (`MIN:MAX`, or N for N:N)"},
		},
	}
	a.programArgs[cmd] = func(string) bool { return true }
	cmd.Action = func(c *cli.Context) error {
		argv := c.Args().Slice()
		if len(argv) == 0 {
			return usagef(c, "no command given")
		}
		sig, err := spmd.ParseSignal(c.String("notice-signal"))
		if err != nil {
			return usagef(c, "%v", err)
		}
		j := spmd.Job{Command: argv, GPUsDim: c.String("gpus-dim"), NoticeSignal: sig, Stderr: c.App.ErrWriter, MaxRestarts: c.Int("max-restarts")}
		if c.IsSet("nnodes") {
			if j.MinHosts, j.MaxHosts, err = hostsconfig.ParseNNodes(c.String("nnodes")); err != nil {
				return usagef(c, "--nnodes: %v", err)
			}
		}
		if report := jobenv.SPMDReport(); report != nil {
			// The launcher records each restart for monarch status.
			defer report.Close()
			j.OnRestart = func(r spmd.Restart) {
				b, _ := json.Marshal(r)
				report.Write(append(b, '\n'))
			}
		}
		a.code = actorrt.Run(func(ctx context.Context) error { return spmd.Run(ctx, j) })
		return nil
	}
	return cmd
}
