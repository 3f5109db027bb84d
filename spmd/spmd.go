package spmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Job is what Run runs.
type Job struct {
	// Command is run on every proc.
	Command []string
	// GPUsDim is the dimension of the procs whose index is a proc's
	// CUDA_VISIBLE_DEVICES; "" for "gpus".
	GPUsDim string
	// Stderr receives Run's own lines (default os.Stderr).
	Stderr io.Writer
}

// defaultProcs is one proc per host, as torchrun's --nproc-per-node.
var defaultProcs = actorrt.Dims{{"procs", 1}}

// Run runs j on the job's procs and waits for them (see the package
// doc). ctx's end stops them.
func Run(ctx context.Context, j Job) error {
	if len(j.Command) == 0 || j.Command[0] == "" {
		return errors.New("spmd: no command")
	}
	stderr := j.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if errors.Is(err, actorrt.ErrNoHostsConfig) {
		hosts, err = actorrt.ThisHost(), nil
	}
	if err != nil {
		return err
	}
	opts := []actorrt.ProcOption{actorrt.WithCommand(j.Command...)}
	if j.GPUsDim != "" {
		opts = append(opts, actorrt.WithGPUsDim(j.GPUsDim))
	}
	procs, err := hosts.SpawnProcs(ctx, actorrt.JobProcs(defaultProcs), opts...)
	if err != nil {
		return err
	}
	stop := func() { procs.Stop(context.WithoutCancel(ctx)) }
	ends := procs.Ends()
	for left := procs.Extent().NumRanks(); left > 0; left-- {
		var e actorrt.ProcEnd
		select {
		case e = <-ends:
		case <-ctx.Done():
			// A stop (SIGTERM to the job): the commands get SIGTERM and
			// what is left of the stop grace, as under torchrun.
			grace := 5 * time.Second
			var n *actorrt.PreemptNotice
			if errors.As(context.Cause(ctx), &n) && !n.Deadline.IsZero() {
				grace = time.Until(n.Deadline)
			}
			procs.StopWithin(context.WithoutCancel(ctx), grace)
			return context.Cause(ctx)
		}
		if e.Status == 0 {
			continue
		}
		code := e.Status
		if code < 0 || code > 255 {
			code = 1
		}
		fmt.Fprintf(stderr, "monarch: rank %d (%v) on %s failed: %s; stopping the others\n", e.Point.Rank(), e.Point, e.Host, e.Reason)
		stop()
		return &actorrt.ExitError{Code: code}
	}
	return nil
}
