package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// startClient starts the job's program as its client, with the job file's
// environment and then env, the job contract. An SPMD job's client is
// this monarch binary's `monarch spmd`, which runs the command on every
// proc.
func startClient(cfg *RunConfig, env jobenv.Env) (*child.Process, error) {
	job := cfg.Job
	program, args := job.Program, job.Args
	if job.SPMD != nil {
		program = cfg.Self
		args = append([]string{"spmd", "--gpus-dim", job.SPMD.GPUsDim, "--"}, job.SPMD.Command...)
	}
	cmd := exec.Command(program, args...)
	cmd.Dir = job.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, cfg.Stdout, cfg.Stderr
	cmd.Env = childEnv(env, job.Env...)
	p, err := child.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("launch: start %s: %w", program, err)
	}
	return p, nil
}

// superviseClient waits for the client to end and returns its exit status
// (as a shell reports it). It passes SIGINT and SIGTERM on to the client,
// sends it SIGTERM when ctx ends, and kills it grace after the first of
// these. stopped says the job was asked to stop so.
//
// Each agent process reported on ended meanwhile is handed to onEnd. An
// error from onEnd fails the job (an agent that could not start): the
// client is sent SIGTERM, and superviseClient returns status 1 and the
// last such error once the client has ended.
func superviseClient(ctx context.Context, client *child.Process, grace time.Duration, ended <-chan agentEnd, onEnd func(agentEnd) error) (code int, stopped bool, err error) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var failure error
	var kill <-chan time.Time
	interrupt := func(sig os.Signal) {
		stopped = true
		client.Signal(sig)
		if kill == nil {
			kill = time.After(grace)
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
			interrupt(sig)
		case <-done:
			interrupt(syscall.SIGTERM)
			done = nil
		case e := <-ended:
			if err := onEnd(e); err != nil {
				failure = err
				interrupt(syscall.SIGTERM)
			}
		case <-kill:
			client.Kill()
		}
	}
}
