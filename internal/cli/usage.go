package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/internal/didyoumean"
	"github.com/urfave/cli/v2"
)

// usageError is a command line a command cannot take. Its exit status is
// 2, as for usage errors in most tools, and it carries the command's
// usage line: the user sees what to write without the whole help.
type usageError struct {
	msg   string
	usage string // empty: none known (a command run outside newApp)
}

func (e *usageError) Error() string {
	if e.usage == "" {
		return e.msg
	}
	return e.msg + "\nusage: " + e.usage
}

func (e *usageError) ExitCode() int { return 2 }

// usagef returns a usage error of c's command, its message prefixed with
// the command's name ("config check: ").
func usagef(c *cli.Context, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if name := commandName(c.Command); name != "" {
		msg = name + ": " + msg
	}
	return &usageError{msg: msg, usage: usageOf(c.Command)}
}

// commandName is cmd's name after "monarch": "config check", or "" for
// monarch itself.
func commandName(cmd *cli.Command) string {
	if cmd == nil {
		return ""
	}
	words := strings.Fields(cmd.HelpName)
	if len(words) < 2 {
		return ""
	}
	return strings.Join(words[1:], " ")
}

// usageOf is the first line of cmd's usage text.
func usageOf(cmd *cli.Command) string {
	if cmd == nil {
		return ""
	}
	first, _, _ := strings.Cut(cmd.UsageText, "\n")
	return first
}

// usageLine is the usage of a command named path: its options, if it has
// any, then its arguments.
func usageLine(cmd *cli.Command, path string) string {
	if len(cmd.Subcommands) > 0 {
		return path + " COMMAND"
	}
	for _, f := range cmd.Flags {
		if v, ok := f.(cli.VisibleFlag); !ok || v.IsVisible() {
			path += " [options]"
			break
		}
	}
	if cmd.ArgsUsage != "" {
		path += " " + cmd.ArgsUsage
	}
	return path
}

// onUsageError turns the flag package's errors into usage errors worded
// for the user: the flag as written, the value and what was wanted.
func onUsageError(c *cli.Context, err error, _ bool) error {
	return usagef(c, "%s", flagError(c.Command.Flags, err))
}

var (
	reUnknownFlag  = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	reInvalidValue = regexp.MustCompile(`(?s)^invalid value (".*") for flag -(\S+): (.*)$`)
	reNeedsValue   = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
)

func flagError(flags []cli.Flag, err error) string {
	msg := err.Error()
	if m := reUnknownFlag.FindStringSubmatch(msg); m != nil {
		return "unknown flag " + dashed(m[1]) + meantFlag(flags, m[1])
	}
	if m := reNeedsValue.FindStringSubmatch(msg); m != nil {
		return dashed(m[1]) + " needs a value"
	}
	m := reInvalidValue.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want := m[3]
	switch findFlag(flags, m[2]).(type) {
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag, *cli.IntSliceFlag, *cli.Int64SliceFlag:
		want = "want a whole number"
	case *cli.Float64Flag, *cli.Float64SliceFlag:
		want = "want a number"
	case *cli.DurationFlag:
		want = "want a duration such as 30s or 5m"
	case *cli.BoolFlag:
		want = "want true or false"
	}
	return fmt.Sprintf("%s %s: %s", dashed(m[2]), m[1], want)
}

// meantFlag is "; did you mean --detach?" for the visible flag of flags
// closest to name, or "" if none is close. A one-letter name has no
// suggestion: every other letter is one edit away.
func meantFlag(flags []cli.Flag, name string) string {
	if len(name) < 2 {
		return ""
	}
	var known []string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		for _, n := range f.Names() {
			if len(n) > 1 {
				known = append(known, n)
			}
		}
	}
	if s := didyoumean.Closest(name, known); s != "" {
		return "; did you mean " + dashed(s) + "?"
	}
	return ""
}

// unknownCommand is the usage error for name, a word that is not one of
// c's commands, with the visible command it most likely meant.
func unknownCommand(c *cli.Context, name string) error {
	return usagef(c, "unknown command %q%s", name, meantCommand(c, name))
}

// meantCommand is `; did you mean "status"?` for the visible command of
// c closest to name, or "".
func meantCommand(c *cli.Context, name string) string {
	cmds := c.App.Commands
	if c.Command != nil && len(c.Command.Subcommands) > 0 {
		cmds = c.Command.Subcommands
	}
	var known []string
	for _, cmd := range cmds {
		if !cmd.Hidden {
			known = append(known, cmd.Names()...)
		}
	}
	if s := didyoumean.Closest(name, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// dashed writes a flag's name as users do: -f, --hosts.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// atLeast is the Action of a count or index flag: a value below min is a
// usage error, naming what is counted if what is not empty.
func atLeast(flag string, min int, what string) func(*cli.Context, int) error {
	if what != "" {
		what = " " + what
	}
	return func(c *cli.Context, v int) error {
		if v < min {
			return usagef(c, "--%s %d: want %d or more%s", flag, v, min, what)
		}
		return nil
	}
}

// checkArgCount checks, before action runs, that the command got the
// number of arguments its ArgsUsage shows: "JOB" one, "[JOB]" at most
// one, "" none. A usage it does not read that way ("A | B", "ARGS...",
// "--") leaves the count to the command.
func checkArgCount(cmd *cli.Command, action cli.ActionFunc) cli.ActionFunc {
	usage := cmd.ArgsUsage
	if strings.ContainsAny(usage, "|(") || strings.Contains(usage, "...") || strings.Contains(usage, "--") {
		return action
	}
	var required []string
	optional, depth := 0, 0
	for _, w := range strings.Fields(usage) {
		if depth == 0 {
			if strings.HasPrefix(w, "[") {
				optional++
			} else {
				required = append(required, w)
			}
		}
		depth += strings.Count(w, "[") - strings.Count(w, "]")
	}
	return func(c *cli.Context) error {
		args := c.Args().Slice()
		switch max := len(required) + optional; {
		case len(args) < len(required):
			return usagef(c, "missing %s", required[len(args)])
		case len(args) > max:
			return usagef(c, "too many arguments: %s", quoteAll(args[max:]))
		}
		return action(c)
	}
}

func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}
