package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
)

// Detached jobs. --detach gives a job its id at once and leaves it to
// run: in the scheduler's queue (sbatch) when it has one and this is not
// already a batch job, else as a launcher process of its own here, in a
// session of its own, with no terminal. Either way the job's record is
// written first, under the id printed, and the launcher that runs the
// job later keeps that record (RunConfig.JobID): one job, one id, one
// row in status, whatever the queue does to it (a requeue runs it again
// under the same id).

// OutputPath is where a detached job's launcher writes its output when
// no --output is given: beside the job's record.
func OutputPath(dir, job string) string { return filepath.Join(dir, job+".out") }

// detachedStart bounds how long --detach waits for a launcher started
// here to record its job, or to fail.
const detachedStart = 30 * time.Second

// detach submits or starts the job, prints its id on cfg.Stdout and
// what to do next on cfg.Progress.
// jobs are the store's, for the dependencies (cfg.After).
func detach(ctx context.Context, cfg *RunConfig, k kind, jobs []*JobState) error {
	if len(cfg.Rerun) == 0 {
		return errors.New("launch: --detach: no command line to run the job with")
	}
	id, err := jobstate.NewID()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	out := cfg.Output
	if out == "" {
		out = OutputPath(cfg.StateDir, id)
	}
	rec := &JobState{Job: id, Scheduler: k.name, Program: programOf(cfg.Job), State: StateSubmitted,
		Started: time.Now(), Host: hostname(), Output: out, StopGrace: cfg.Job.StopGrace, After: cfg.After}
	rerun := withJobID(cfg.Rerun, id)
	if k.queue != nil && k.queue.current() == "" {
		rec.Batch = k.name
		dep, err := queueDependency(k, cfg.After, jobs)
		if err != nil {
			return err
		}
		if err := jobstate.Save(cfg.StateDir, rec); err != nil {
			return err
		}
		bid, err := k.queue.submit(ctx, cfg, batchJob{rerun: rerun, name: cfg.jobName(), output: out, dependency: dep})
		if err != nil {
			os.Remove(jobstate.Path(cfg.StateDir, id))
			return err
		}
		// The batch job may already run and keep the record.
		err = jobstate.Amend(cfg.StateDir, id, func(r *JobState) bool {
			if r.BatchID != "" {
				return false
			}
			r.BatchID = bid
			return true
		})
		if err != nil {
			return err
		}
		printDetached(cfg, id, fmt.Sprintf("%s job %s", k.title, bid), out)
		return nil
	}
	if err := jobstate.Save(cfg.StateDir, rec); err != nil {
		return err
	}
	// The launcher started here waits for the dependencies itself.
	rerun = slices.Insert(rerun, 1, afterArgs(cfg.After)...)
	pid, err := startDetached(ctx, cfg, id, rerun, out)
	if err != nil {
		os.Remove(jobstate.Path(cfg.StateDir, id))
		return err
	}
	printDetached(cfg, id, "running here as pid "+fmt.Sprint(pid), out)
	return nil
}

// withJobID is rerun (a monarch command line, command first) with the
// job's id given to the command.
func withJobID(rerun []string, id string) []string {
	return slices.Concat(rerun[:1], []string{"--job-id=" + id}, rerun[1:])
}

// startDetached starts `monarch <rerun>` here in a session of its own,
// its output appended to out, and waits until it has recorded the job
// (or ended: then its output says why). It returns the launcher's pid.
func startDetached(ctx context.Context, cfg *RunConfig, id string, rerun []string, out string) (int, error) {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("launch: --detach: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(cfg.Self, rerun...)
	cmd.Dir, _ = os.Getwd()
	cmd.Stdout, cmd.Stderr = f, f
	// Its own session: no terminal, and a Ctrl-C here is not its.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("launch: --detach: %w", err)
	}
	pid := cmd.Process.Pid
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	jobstate.Amend(cfg.StateDir, id, func(r *JobState) bool {
		if r.State != StateSubmitted || r.PID != 0 {
			return false // it recorded itself already
		}
		r.Of(pid)
		return true
	})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(detachedStart)
	for {
		select {
		case err := <-ended:
			if r, lerr := jobstate.Load(cfg.StateDir, id); lerr == nil && r.State != StateSubmitted {
				return pid, nil // it ran, and ended already: its record says how
			}
			tail, _ := lastLines(out, 10)
			return 0, fmt.Errorf("launch: the detached job %s ended at once (%v); its output, %s:\n%s", id, err, out, tail)
		case <-tick.C:
			if r, err := jobstate.Load(cfg.StateDir, id); err == nil && r.State != StateSubmitted {
				return pid, nil
			}
		case <-limit:
			return pid, nil // it runs, slowly: status will say
		case <-ctx.Done():
			return pid, nil // it runs on by itself
		}
	}
}

// printDetached prints the job's id alone on stdout (for scripts:
// id=$(monarch run --detach job.toml)) and the next steps on Progress.
func printDetached(cfg *RunConfig, id, where, out string) {
	fmt.Fprintln(cfg.Stdout, id)
	if a := cfg.Job.Array; a != nil {
		fmt.Fprintf(cfg.Progress, "monarch: array %s of %d tasks submitted (%s); task I's output goes to %s\n"+
			"  monarch status %[1]s     see its tasks\n"+
			"  monarch logs -f %[1]s_I  follow task I's log\n"+
			"  monarch stop %[1]s       stop it (stop %[1]s_I: task I alone)\n", id, len(a.Tasks), where, OutputPath(cfg.StateDir, id+"_I"))
		return
	}
	fmt.Fprintf(cfg.Progress, "monarch: job %s submitted (%s); its output goes to %s\n"+
		"  monarch logs -f %[1]s    follow its output\n"+
		"  monarch status %[1]s     see its state\n"+
		"  monarch stop %[1]s       stop it\n", id, where, out)
}

// lastLines returns the last n lines of file path (at most 64 KiB read).
func lastLines(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	const most = 64 << 10
	off := max(0, fi.Size()-most)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n"), nil
}
