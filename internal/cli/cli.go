package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

// Main runs the monarch command line args (args[0] is the program's
// name) and returns its exit status: 0; 1 on failure; 2 for a command
// line monarch cannot take; run and local return their program's.
// No signal is caught here: the commands that have something to tear
// down catch what they need (see tearsDown).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(ctx, args)
}

// app is the monarch command line. Commands return an exit status through
// code so that `monarch local` can exit with its program's status.
type app struct {
	cli  *cli.App
	code int
	// programArgs marks the commands that run a program given on their
	// command line: from the argument it says begins the program, every
	// argument is the program's (see commandLine).
	programArgs map[*cli.Command]func(arg string) bool
	// dashed: the command line wrote "--" before its first argument.
	dashed bool
}

func newApp(stdout, stderr io.Writer) *app {
	a := &app{programArgs: map[*cli.Command]func(string) bool{}}
	a.cli = &cli.App{
		Name:  "monarch",
		Usage: "run programs of many actors on many processes and machines",
		UsageText: "monarch COMMAND [options] [ARGS...]\n" +
			"monarch help [COMMAND]",
		Description: "A command's options may come before or after its arguments, up to -- (and, for\n" +
			"monarch local PROGRAM, up to PROGRAM: the rest is the program's).\n" +
			"Exit status: 0; 1 on failure; 2 for a command line monarch cannot take; run and local\n" +
			"exit with the program's status (130 after Ctrl-C). A command with nothing to stop ends\n" +
			"at once on SIGINT or SIGTERM (a shell shows 130 or 143).",
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        true,
		HideVersion:            true, // --version below prints what `monarch version` prints
		UseShortOptionHandling: true,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "version", Usage: "print the version of monarch (as monarch version)"},
		},
		Action: func(c *cli.Context) error {
			switch {
			case c.Bool("version"):
				return printVersion(c)
			case c.NArg() > 0:
				return unknownCommand(c, c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			versionCommand(),
			tearsDown(runCommand(a)),
			tearsDown(localCommand(a)),
			statusCommand(),
			stopCommand(),
			cleanCommand(),
			tearsDown(logsCommand()),
			stacksCommand(),
			dashboardCommand(),
			profileCommand(),
			execCommand(a),
			topCommand(a),
			configCommand(),
			tearsDown(agentCommand(a)),
			spmdCommand(a),
		},
		// Errors are printed once, by run.
		ExitErrHandler: func(*cli.Context, error) {},
		// Reached through urfave/cli's own help paths only: commandLine
		// and the Actions report unknown commands as usage errors.
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "monarch: unknown command %q%s\nusage: %s\n", name, meantCommand(c, name), usageOf(c.Command))
			a.code = 2
		},
	}
	a.cli.OnUsageError = onUsageError
	quietSwitches(a.cli.Flags)
	for _, c := range a.cli.Commands {
		prepare(c, "monarch "+c.Name)
	}
	return a
}

// run runs the command line, prints its error if any and returns the
// exit status.
func (a *app) run(ctx context.Context, args []string) int {
	err := a.cli.RunContext(ctx, a.commandLine(args))
	code := a.code
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if err != nil {
		if !errors.As(err, new(launch.Reported)) { // said already, as the launcher's last line
			fmt.Fprintln(a.cli.ErrWriter, "monarch:", err)
		}
		if code == 0 {
			code = 1
		}
	}
	return code
}

// prepare gives every command, those added later too, the same shape:
// a usage line (shown in its help and after a usage error), usage errors
// with exit status 2, a check of its number of arguments, and help that
// states each default once.
func prepare(cmd *cli.Command, path string) {
	cmd.HideHelpCommand = true // `monarch help CMD` is commandLine's
	if cmd.UsageText == "" {
		cmd.UsageText = usageLine(cmd, path)
	}
	cmd.OnUsageError = onUsageError
	quietSwitches(cmd.Flags)
	if len(cmd.Subcommands) > 0 && cmd.Action == nil {
		cmd.Action = func(c *cli.Context) error {
			if c.NArg() > 0 {
				return unknownCommand(c, c.Args().First())
			}
			return cli.ShowSubcommandHelp(c)
		}
	} else if cmd.Action != nil {
		cmd.Action = checkArgCount(cmd, cmd.Action)
	}
	for _, sub := range cmd.Subcommands {
		prepare(sub, path+" "+sub.Name)
	}
}

// quietSwitches keeps "(default: false)" out of the help: a switch is off
// unless given.
func quietSwitches(flags []cli.Flag) {
	for _, f := range flags {
		if b, ok := f.(*cli.BoolFlag); ok && !b.Value {
			b.DisableDefaultText = true
		}
	}
}
