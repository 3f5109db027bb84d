package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// slurmQueue is Slurm's queue of batch jobs.
type slurmQueue struct{}

func (slurmQueue) current() string { return os.Getenv("SLURM_JOB_ID") }

// submit runs `sbatch <resources> --wrap "monarch <b.rerun>"`, named
// b.name, its output to b.output.
func (slurmQueue) submit(ctx context.Context, cfg *RunConfig, b batchJob) (string, error) {
	args, err := allocArgs(cfg.Hosts.Slurm)
	if err != nil {
		return "", err
	}
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
	if b.dependency != "" {
		// A dependency that fails ends the job, as monarch's own
		// launchers end theirs, rather than leave it pending for good.
		args = append(args, "--dependency="+b.dependency, "--kill-on-invalid-dep=yes")
	}
	if b.array != "" {
		args = append(args, "--array="+b.array)
	}
	// exec: monarch run is the batch shell, which Slurm signals.
	args = append(args, "--parsable", "--job-name="+b.name, "--output="+b.output,
		"--wrap=exec "+shellQuote(cfg.Monarch)+" "+shellJoin(b.rerun))
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sbatch", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		said := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if err := (slurmHosts{slurmScheduler{cfg.Hosts.Slurm}, cfg.Hosts.Path}).allocFailed(ctx, "sbatch", said); err != nil {
			return "", err // in the hosts file's terms
		}
		return "", fmt.Errorf("slurm: sbatch: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if id == "" {
		return "", fmt.Errorf("slurm: sbatch printed no job id")
	}
	return id, nil
}

// state asks scontrol, which knows a job for MinJobAge after it ends
// (squeue forgets it sooner and says less).
func (slurmQueue) state(ctx context.Context, id string) batchState {
	out, known, err := showJob(ctx, id)
	switch {
	case err != nil:
		return batchState{}
	case !known:
		return batchState{State: "finished"} // too old for Slurm to know
	}
	return parseSlurmJob(out)
}

// showJob runs `scontrol -o show job id`; known is false when Slurm no
// longer knows the job (it ended more than MinJobAge ago).
func showJob(ctx context.Context, id string) (out string, known bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, "scontrol", "-o", "show", "job", id).Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "Invalid job id"):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return string(b), true, nil
}

// parseSlurmJob reads the JobState, Reason, PreemptTime and Restarts of
// `scontrol -o show job`. While Slurm ends a job it is COMPLETING, its Reason
// TimeLimit for a time limit and None for both a scancel and a
// preemption: PreemptTime, set only by a preemption, tells those apart.
func parseSlurmJob(line string) batchState {
	var st, reason string
	preempted, restarts := false, 0
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			st = v
		} else if v, ok := strings.CutPrefix(f, "Reason="); ok {
			reason = v
		} else if v, ok := strings.CutPrefix(f, "PreemptTime="); ok {
			preempted = v != "None" && v != "Unknown" && v != ""
		} else if v, ok := strings.CutPrefix(f, "Restarts="); ok {
			restarts, _ = strconv.Atoi(v)
		}
	}
	b := batchState{State: strings.ToLower(st), Restarts: max(restarts, 0)}
	if reason != "None" {
		b.Reason = reason
	}
	switch st {
	case "":
		return batchState{}
	case "PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING":
	case "COMPLETING", "STOPPED", "SIGNALING":
		b.Cause = slurmCause("CANCELLED", reason) // ending: why, if Slurm says
		switch {
		case preempted:
			b.Cause = "preempted"
		case b.Cause == "cancelled by scancel" && reason != "" && reason != "None":
			b.Cause = "" // ending for a reason we cannot name
		}
	default:
		b.State, b.Cause = "finished", slurmCause(st, reason)
		if preempted && st == "CANCELLED" {
			b.Cause = "preempted"
		}
	}
	return b
}

// slurmNeverSatisfied is Slurm's Reason for a job whose dependency
// failed: pending for good, or, with --kill-on-invalid-dep, cancelled.
const slurmNeverSatisfied = "DependencyNeverSatisfied"

// slurmCause names the end of a job in Slurm's state st (for reason), as
// a user would say it; "" for an end that is no cause of ours (COMPLETED).
func slurmCause(st, reason string) string {
	switch {
	case st == "TIMEOUT" || reason == "TimeLimit":
		return "time limit"
	case st == "PREEMPTED" || strings.HasPrefix(reason, "Preempt"):
		return "preempted"
	case st == "NODE_FAIL" || reason == "NodeDown":
		return "a node failed (Slurm: NODE_FAIL)"
	case st == "DEADLINE":
		return "deadline"
	case st == "OUT_OF_MEMORY":
		return "out of memory (Slurm: OUT_OF_MEMORY)"
	case st == "BOOT_FAIL":
		return "a node failed to boot (Slurm: BOOT_FAIL)"
	case reason == slurmNeverSatisfied:
		return "dependency never satisfied"
	case st == "CANCELLED":
		return "cancelled by scancel"
	case st == "FAILED":
		return "failed (Slurm: FAILED)"
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

// cancelArray cancels batch array id: its tasks that wait in the queue,
// and the batch shells of those that run, with SIGTERM, as cancel does
// gracefully.
func (slurmQueue) cancelArray(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, args := range [][]string{{"--state=PENDING", id}, {"--state=RUNNING", "--batch", "--signal=TERM", id}} {
		if out, err := exec.CommandContext(ctx, "scancel", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("scancel %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
