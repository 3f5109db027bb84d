package main

import (
	"errors"

	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

func localCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "local",
		Usage:     "run a program built with the monarch SDK on this machine",
		ArgsUsage: "-- PROGRAM [ARGS...]",
		Description: "Starts the job's bus on loopback, runs PROGRAM as the job's client and exits with its\n" +
			"status. Procs the program spawns run on this machine. Ctrl-C stops the program and all its procs.",
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) == 0 {
				return errors.New("local: no program given (usage: monarch local -- PROGRAM [ARGS...])")
			}
			code, err := launch.Local(c.Context, launch.LocalConfig{
				Program: args[0],
				Args:    args[1:],
				Stdout:  c.App.Writer,
				Stderr:  c.App.ErrWriter,
			})
			a.code = code
			return err
		},
	}
}
