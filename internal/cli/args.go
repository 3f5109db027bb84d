package cli

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// commandLine rewrites a command line into the form urfave/cli parses.
// Like the flag package, it takes a command's flags only before the
// command's first argument, so:
//
//	monarch help CMD...              ->  monarch CMD... --help
//	monarch CMD ARGS... --help       ->  monarch CMD --help
//	monarch run job.toml --detach    ->  monarch run --detach job.toml
//
// Flags move ahead of the arguments, in their order, each with its value
// when the command's flag takes one ("--hosts 3"; "--hosts=3" is one
// argument). "--" ends the flags: it and what follows stay as written.
// For a command that runs a program (a.programArgs), so does everything
// from the program's name on: those flags are the program's.
func (a *app) commandLine(args []string) []string {
	if len(args) < 2 {
		return args
	}
	rest := args[1:]
	n := 0
	for n < len(rest) && isFlag(rest[n]) { // monarch's own: none takes a value
		n++
	}
	global, rest := rest[:n], rest[n:]
	help := slices.ContainsFunc(global, isHelpFlag)
	for len(rest) > 0 && rest[0] == "help" {
		help, rest = true, rest[1:]
	}
	cmd, n := a.findCommand(rest)
	if help {
		if n < len(rest) && !isFlag(rest[n]) && (cmd == nil || len(cmd.Subcommands) > 0) {
			n++ // not a command: the parent says so
		}
		return append(append([]string{args[0]}, rest[:n]...), "--help")
	}
	if cmd == nil || len(cmd.Subcommands) > 0 {
		return args // no command, or a word that is not one of its commands: as above
	}
	out := append(append([]string{args[0]}, global...), rest[:n]...)
	flags, positional, tail := splitFlags(cmd.Flags, rest[n:], a.programArgs[cmd])
	a.dashed = len(positional) == 0 && len(tail) > 0 && tail[0] == "--"
	if slices.ContainsFunc(flags, func(f string) bool { return asksHelp(cmd.Flags, f) }) {
		return append(out, "--help")
	}
	return append(append(append(out, flags...), positional...), tail...)
}

// findCommand follows the command names that begin args down the tree of
// commands; n is how many it used.
func (a *app) findCommand(args []string) (cmd *cli.Command, n int) {
	cmds := a.cli.Commands
	for n < len(args) {
		c := findCommand(cmds, args[n])
		if c == nil {
			break
		}
		cmd, n = c, n+1
		if len(c.Subcommands) == 0 {
			break
		}
		cmds = c.Subcommands
	}
	return cmd, n
}

// splitFlags parses a command's arguments into its flags (with their
// values), its other arguments, and the tail left as written: from "--",
// or from the argument that begins a program (isProgram).
func splitFlags(defined []cli.Flag, args []string, isProgram func(string) bool) (flags, positional, tail []string) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			return flags, positional, args[i:]
		case isFlag(arg):
			flags = append(flags, arg)
			if takesValue(defined, arg) {
				if i+1 == len(args) {
					// Last, with no value: left last, so that the parser
					// says the flag needs one rather than take an argument.
					return flags, nil, nil
				}
				i++
				flags = append(flags, args[i])
			}
		case isProgram != nil && isProgram(arg):
			return flags, positional, args[i:]
		default:
			positional = append(positional, arg)
		}
	}
	return flags, positional, nil
}

// isFlag: "-f", "--hosts", "--hosts=3"; not "-" (a file name for some
// tools) nor "--".
func isFlag(arg string) bool {
	return len(arg) > 1 && arg[0] == '-' && arg != "--"
}

func isHelpFlag(arg string) bool {
	return slices.Contains(cli.HelpFlag.Names(), strings.TrimLeft(arg, "-"))
}

// asksHelp: arg is --help, -h, or holds -h among one-letter switches
// written together (-fh).
func asksHelp(defined []cli.Flag, arg string) bool {
	if isHelpFlag(arg) {
		return true
	}
	if len(arg) < 3 || arg[1] == '-' || !strings.Contains(arg, "h") {
		return false
	}
	for _, r := range arg[1:] {
		if _, ok := findFlag(defined, string(r)).(*cli.BoolFlag); !ok && r != 'h' {
			return false
		}
	}
	return true
}

// takesValue: arg is a flag of defined that takes a value, written
// without "=value", so the value is the next argument. An unknown flag
// takes none: the parser then reports it.
func takesValue(defined []cli.Flag, arg string) bool {
	name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	f, ok := findFlag(defined, name).(cli.DocGenerationFlag)
	return !hasValue && ok && f.TakesValue()
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
