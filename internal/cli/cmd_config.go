package cli

import (
	"fmt"
	"io"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/urfave/cli/v2"
)

// configCommand is `monarch config`: checks of the configuration files,
// so that mistakes show up as file:line messages before a job spends an
// allocation finding them.
func configCommand() *cli.Command {
	return &cli.Command{
		Name:            "config",
		Usage:           "check job files and MONARCH_HOSTS files",
		HideHelpCommand: true,
		Subcommands: []*cli.Command{{
			Name:      "check",
			Usage:     "check a job file or a MONARCH_HOSTS file and say what monarch would do with it",
			ArgsUsage: "FILE",
			Description: "Reads FILE as a job file (it sets program) or a MONARCH_HOSTS file (it sets scheduler),\n" +
				"checks every key and value, and prints what `monarch run` would do with it. Each problem\n" +
				"is reported as FILE:LINE: KEY: what is wrong; the exit status is 1 if there is any.",
			Action: func(c *cli.Context) error {
				// One argument: prepare checks the count ArgsUsage shows.
				return checkConfig(c.App.Writer, c.Args().First())
			},
		}},
	}
}

// checkConfig loads path and, if it is valid, describes it to w.
func checkConfig(w io.Writer, path string) error {
	v, err := hostsconfig.Load(path)
	if err != nil {
		return err // already "file:line: key: msg"
	}
	switch v := v.(type) {
	case *hostsconfig.Job:
		fmt.Fprintf(w, "%s: valid job file\n%s\n", path, v.Describe())
	case *hostsconfig.Hosts:
		fmt.Fprintf(w, "%s: valid MONARCH_HOSTS file\n%s\n", path, v.Describe())
	}
	return nil
}
