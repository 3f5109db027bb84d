// Command monarch runs programs built with the monarch SDK: on this
// machine (monarch local), on Slurm clusters and over ssh (monarch run).
// The command is package internal/cli.
package main

import (
	"context"
	"os"

	"github.com/monarch-go/monarch/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args, os.Stdout, os.Stderr))
}
