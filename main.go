// Command monarch runs programs built with the monarch SDK: on this
// machine (monarch local), on Slurm clusters and over ssh (monarch run).
package main

import (
	"context"
	"os"
)

func main() {
	// No signal is caught here: the commands that have something to tear
	// down catch what they need (see tearsDown).
	os.Exit(newApp(os.Stdout, os.Stderr).run(context.Background(), os.Args))
}
