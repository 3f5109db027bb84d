package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// app is the monarch command line. Commands return an exit status through
// exitCode so that `monarch local` can exit with its program's status.
type app struct {
	cli  *cli.App
	code int
}

func newApp(stdout, stderr io.Writer) *app {
	a := &app{}
	a.cli = &cli.App{
		Name:                   "monarch",
		Usage:                  "run programs of many actors on many processes and machines",
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        true,
		UseShortOptionHandling: true,
		Commands: []*cli.Command{
			versionCommand(),
			runCommand(a),
			localCommand(a),
			statusCommand(),
			stopCommand(),
			cleanCommand(),
			logsCommand(),
			configCommand(),
			agentCommand(a),
		},
		// Errors are printed once, by main.
		ExitErrHandler: func(*cli.Context, error) {},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "monarch: unknown command %q (see monarch --help)\n", name)
			a.code = 2
		},
	}
	return a
}

// run runs the command line and returns the exit status.
func (a *app) run(ctx context.Context, args []string) (int, error) {
	err := a.cli.RunContext(ctx, args)
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode(), err
	}
	return a.code, err
}
