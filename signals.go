package main

import (
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Signals. A command that starts something it must stop in order (a
// job's bus, agents and program; a follow of a job's log) is marked with
// tearsDown: SIGTERM then cancels its context, and it handles SIGINT
// itself (launch passes it to the program, which exits 130). Every other
// command keeps Go's default: SIGINT or SIGTERM ends monarch at once,
// killed by that signal, which a shell shows as 130 or 143, however the
// command is waiting (a slow file, a FIFO, a network mount).
func tearsDown(cmd *cli.Command) *cli.Command {
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM)
		defer stop()
		c.Context = ctx
		return action(c)
	}
	return cmd
}
