package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// slurmQueue is Slurm's queue of batch jobs.
type slurmQueue struct{}

func (slurmQueue) current() string { return os.Getenv("SLURM_JOB_ID") }

// submit runs `sbatch <resources> --wrap "monarch run JOB"`; the batch
// job's output goes to the state directory.
func (slurmQueue) submit(ctx context.Context, cfg *RunConfig) (string, error) {
	args, err := allocArgs(cfg.Hosts.Slurm)
	if err != nil {
		return "", err
	}
	out := cfg.StateDir + "/slurm-%j.out"
	s := cfg.Hosts.Slurm
	if s.SignalBefore > 0 {
		// To monarch run alone (B:), which warns its program; the
		// procs would take USR1 as a reason to end.
		args = append(args, fmt.Sprintf("--signal=B:USR1@%d", int(s.SignalBefore/time.Second)))
	}
	if s.Requeue {
		// The output of every run, not the last run's alone.
		args = append(args, "--requeue", "--open-mode=append")
	}
	// exec: monarch run is the batch shell, which Slurm signals.
	args = append(args, "--parsable", "--job-name=monarch", "--output="+out,
		"--wrap=exec "+shellQuote(cfg.Monarch)+" run "+shellQuote(cfg.JobPath))
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sbatch", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("slurm: sbatch: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(b)), ";")
	if id == "" {
		return "", fmt.Errorf("slurm: sbatch printed no job id")
	}
	return id, nil
}

// state asks squeue.
func (slurmQueue) state(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "squeue", "-h", "-j", id, "-o", "%T").Output()
	var ee *exec.ExitError
	switch {
	case err == nil && strings.TrimSpace(string(out)) == "":
		return "finished"
	case err == nil:
		return strings.ToLower(strings.TrimSpace(string(out)))
	case errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "Invalid job id"):
		return "finished" // too old for squeue to know
	}
	return ""
}

// cancel runs scancel; graceful, it sends SIGTERM to the batch shell
// alone, the job's monarch run, which stops its job and ends it.
func (slurmQueue) cancel(ctx context.Context, id string, graceful bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := []string{id}
	if graceful {
		args = []string{"--batch", "--signal=TERM", id}
	}
	if out, err := exec.CommandContext(ctx, "scancel", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("scancel %s: %v: %s", id, err, strings.TrimSpace(string(out)))
	}
	return nil
}
