package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
)

// DefaultGrace is how long an interrupted client has to stop its procs and
// exit before it is killed.
const DefaultGrace = 10 * time.Second

// LocalConfig describes a job run on this machine.
type LocalConfig struct {
	// Program and Args: the client, a program built with the SDK.
	Program string
	Args    []string
	// Env is added to this process's environment for the client.
	Env []string
	// Dir is the client's working directory; empty for this one.
	Dir string
	// Stdout and Stderr receive the client's output (and its procs').
	// Default os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// Grace: see DefaultGrace.
	Grace time.Duration
}

// Local runs a job on this machine: it starts a loopback-only bus, runs the
// client against it and returns the client's exit status (128+n if it died
// of signal n). ctx ending, SIGINT or SIGTERM interrupts the client.
func Local(ctx context.Context, cfg LocalConfig) (int, error) {
	if cfg.Program == "" {
		return 0, errors.New("launch: local: no program to run")
	}
	path, err := exec.LookPath(cfg.Program)
	if err != nil {
		return 0, fmt.Errorf("launch: local: %w", err)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		return 0, fmt.Errorf("launch: local: %w", err)
	}
	defer srv.Shutdown()

	cmd := exec.Command(path, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr = cfg.Stdout, cfg.Stderr
	cmd.Env = append(append(os.Environ(), cfg.Env...),
		bus.EnvURL+"="+srv.URL(),
		bus.EnvToken+"="+srv.Token(),
		bus.EnvJob+"="+NewJobID(),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startOnLockedThread(cmd); err != nil {
		return 0, fmt.Errorf("launch: local: start %s: %w", cfg.Program, err)
	}
	return wait(ctx, cmd, cfg.Grace), nil
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
// subject.
func NewJobID() string {
	return fmt.Sprintf("j%x%s", time.Now().Unix()&0xffffff, bus.NewToken()[:6])
}
