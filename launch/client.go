package launch

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// startClient starts the job's program as its client, with the job file's
// environment and then env, the job contract. An SPMD job's client is
// this monarch binary's `monarch spmd`, which runs the command on every
// proc.
//
// The client's own stdout and stderr pass through the launcher, which
// publishes their lines on bus for the job's log (see clientoutput.go).
//
// An SPMD job's client reports the restarts of its ranks on a pipe of its
// own (see spmdReports): reports is its launcher's end, nil for another
// job.
func startClient(cfg *RunConfig, env jobenv.Env, bus publisher) (client *child.Process, reports *spmdReports, err error) {
	job := cfg.Job
	program, args := job.Program, job.Args
	if job.SPMD != nil {
		program = cfg.Self
		args = append([]string{"spmd", "--gpus-dim", job.SPMD.GPUsDim, "--notice-signal", cmp.Or(job.SPMD.NoticeSignal, "USR1"),
			"--max-restarts", strconv.Itoa(job.SPMD.MaxRestarts)}, job.SPMD.Command...)
		if sp := job.SPMD; sp.MaxHosts > 0 {
			args = slices.Insert(args, len(args)-len(sp.Command), "--nnodes", fmt.Sprintf("%d:%d", sp.MinHosts, sp.MaxHosts))
		}
		args = slices.Insert(args, len(args)-len(job.SPMD.Command), "--")
	}
	cmd := exec.Command(program, args...)
	cmd.Dir = job.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, cfg.Stdout, cfg.Stderr
	cmd.Env = childEnv(env, procVars(job)...)
	captureClientOutput(cmd, cfg.Stdout, cfg.Stderr, bus, env.Job)
	var w *os.File
	if job.SPMD != nil {
		if reports, w, err = reportPipe(cmd); err != nil {
			return nil, nil, fmt.Errorf("launch: start %s: %w", program, err)
		}
		defer w.Close() // the client's now
	}
	p, err := child.Start(cmd)
	if err != nil {
		if reports != nil {
			reports.r.Close()
		}
		return nil, nil, fmt.Errorf("launch: start %s: %w", program, err)
	}
	return p, reports, nil
}

// stopTimes are how long superviseClient lets the client take.
type stopTimes struct {
	// grace: an interrupted client's time to stop its procs and exit.
	grace time.Duration
	// stop: a client asked to stop (SIGTERM) has it to let its program
	// return, and then grace (the job's stop_grace).
	stop time.Duration
	// warn, when it fires, warns the client of the time limit (SIGUSR1).
	warn <-chan time.Time
	// relay, if set, passes signals on instead of the client's own Signal
	// (salloc, which would not pass them on to the monarch run it runs).
	relay func(os.Signal)
}

// superviseClient waits for the client to end and returns its exit status
// (as a shell reports it).
//
// ctx's end (SIGTERM to monarch: monarch stop, Slurm) asks the client to
// stop: SIGTERM, which gives its program t.stop to return; the client is
// killed t.stop+t.grace later. SIGINT (Ctrl-C) is passed on, and the
// client killed t.grace later. SIGUSR1 (Slurm's time-limit warning) and
// t.warn are passed on as SIGUSR1. stopped says the job was asked to stop
// or interrupted.
//
// Each agent process reported on ended meanwhile is handed to onEnd. An
// error from onEnd fails the job (an agent that could not start): the
// client is interrupted, and superviseClient returns status 1 and the
// last such error once the client has ended.
func superviseClient(ctx context.Context, client *child.Process, t stopTimes, ended <-chan agentEnd, onEnd func(agentEnd) error) (code int, stopped bool, err error) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	var failure error
	var kill <-chan time.Time
	relay := t.relay
	if relay == nil {
		relay = client.Signal
	}
	interrupt := func(sig os.Signal, within time.Duration) {
		stopped = true
		relay(sig)
		if kill == nil {
			kill = time.After(within)
		}
	}
	done := ctx.Done()
	for {
		select {
		case <-client.Done():
			if failure != nil {
				return 1, false, failure // the launcher's failure, not the client's
			}
			return child.ExitStatus(client.Cmd.ProcessState), stopped, nil
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 {
				relay(sig)
				continue
			}
			interrupt(sig, t.grace)
		case <-t.warn:
			relay(syscall.SIGUSR1)
		case <-done:
			interrupt(syscall.SIGTERM, t.stop+t.grace)
			done = nil
		case e := <-ended:
			if err := onEnd(e); err != nil {
				failure = err
				interrupt(syscall.SIGINT, t.grace)
			}
		case <-kill:
			client.Kill()
		}
	}
}
