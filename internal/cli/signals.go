package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

// Signals. A command that starts something it must stop in order (a
// job's bus, agents and program; a follow of a job's log) is marked with
// tearsDown: SIGTERM, or SIGHUP (its terminal closed), then cancels its
// context with a launch.StopSignal naming the signal, and it handles
// SIGINT itself (launch passes it to the program, which exits 130).
// Every other command keeps Go's default: SIGINT or SIGTERM ends monarch
// at once, killed by that signal, which a shell shows as 130 or 143,
// however the command is waiting (a slow file, a FIFO, a network mount).
func tearsDown(cmd *cli.Command) *cli.Command {
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		ctx, cancel := context.WithCancelCause(c.Context)
		defer cancel(nil)
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(sigs)
		go func() {
			select {
			case sig := <-sigs:
				cancel(launch.StopSignal{Signal: sig})
			case <-ctx.Done():
			}
		}()
		c.Context = ctx
		return action(c)
	}
	return cmd
}
