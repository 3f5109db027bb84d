package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// DefaultGrace is how long an interrupted client has to stop its procs and
// exit before it is killed.
const DefaultGrace = 10 * time.Second

// LocalJob is a job made up from a command line, to run on this machine:
// the program in the current directory, output streamed to the client.
func LocalJob(program string, args []string) (*hostsconfig.Job, error) {
	if program == "" {
		return nil, errors.New("launch: local: no program to run")
	}
	path, err := exec.LookPath(program)
	if err != nil {
		return nil, fmt.Errorf("launch: local: %w", err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("launch: local: %w", err)
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("launch: local: %w", err)
	}
	return &hostsconfig.Job{Program: path, Args: args, Dir: dir, Log: hostsconfig.Log{StreamToClient: true}}, nil
}

// wait returns the client's status, passing on interrupts.
func wait(ctx context.Context, cmd *exec.Cmd, grace time.Duration) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var kill <-chan time.Time
	for {
		select {
		case <-done:
			return exitStatus(cmd.ProcessState)
		case sig := <-sigs:
			cmd.Process.Signal(sig)
			if kill == nil {
				kill = time.After(grace)
			}
		case <-ctx.Done():
			cmd.Process.Signal(syscall.SIGTERM)
			if kill == nil {
				kill = time.After(grace)
			}
			ctx = context.Background()
		case <-kill:
			cmd.Process.Kill()
		}
	}
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// startOnLockedThread starts cmd from an OS thread that is never released.
// Linux sends Pdeathsig when the forking thread exits (golang/go#27505), so
// the thread must live as long as this process.
func startOnLockedThread(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- cmd.Start()
		select {} // keep the thread, and the child's parent-death link, alive
	}()
	return <-errc
}

// NewJobID returns a fresh job id: short, unique, and safe in a NATS
// subject (see jobstate.NewID).
func NewJobID() (string, error) { return jobstate.NewID() }
