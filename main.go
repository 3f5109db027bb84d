// Command monarch runs programs built with the monarch SDK: on this machine
// (monarch local), and later on Slurm clusters and over ssh.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	code, err := newApp(os.Stdout, os.Stderr).run(ctx, os.Args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "monarch:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
