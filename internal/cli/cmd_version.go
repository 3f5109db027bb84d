package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is the release; builds from a checkout add their revision.
const version = "0.1.0"

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:   "version",
		Usage:  "print the version of monarch",
		Action: printVersion,
	}
}

// printVersion is `monarch version` and `monarch --version`.
func printVersion(c *cli.Context) error {
	_, err := fmt.Fprintf(c.App.Writer, "monarch %s%s (%s)\n", version, revision(), runtime.Version())
	return err
}

func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return " " + rev + dirty
}
