package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// Job states, as `monarch status` shows them (see jobstate).
const (
	StateSubmitted = jobstate.Submitted
	StateStarting  = jobstate.Starting
	StateRunning   = jobstate.Running
	StateDone      = jobstate.Done
	StateFailed    = jobstate.Failed
	StateStopped   = jobstate.Stopped
	StateLost      = jobstate.Lost
)

// JobState is what the job store records about a job.
type JobState = jobstate.Record

// DefaultStateDir is hostsconfig.StateDir().
func DefaultStateDir() string { return hostsconfig.StateDir() }

// Counts is what a job's client reports to its launcher on
// JobSubject(job, SubjectCounts) as its hosts and procs come and go: the
// hosts with procs running and the procs running.
type Counts struct {
	Hosts int `json:"hosts"`
	Procs int `json:"procs"`
}

// recordCounts keeps the client's counts in the job's record. A message
// that is not a Counts (not from our client) is dropped: the record then
// keeps the last good counts.
func recordCounts(st *jobstate.Writer, data []byte) {
	var c Counts
	if json.Unmarshal(data, &c) != nil || c.Hosts < 0 || c.Procs < 0 {
		return
	}
	st.Update(func(r *jobstate.Record) { r.Hosts, r.Procs = c.Hosts, c.Procs })
}

// Status lists the jobs in dir, newest first. Jobs whose process is gone
// show as lost (see jobstate.List); submitted batch jobs carry what Slurm
// says of them in SlurmState.
func Status(dir string) ([]*JobState, error) {
	jobs, err := jobstate.List(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range jobs {
		if s.State == StateSubmitted && s.SlurmJob != "" {
			s.SlurmState = squeueState(s.SlurmJob)
		}
	}
	return jobs, nil
}

// squeueState is Slurm's state of a job, lower case: "finished" once it
// has left the queue, "" when squeue cannot say.
func squeueState(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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

// Stop stops a job: a batch job with scancel, a running launcher (or
// directly run program) of this host with SIGTERM (it then tears its job
// down), waiting up to grace+5s for it to go.
func Stop(dir, job string, grace time.Duration) error {
	jobs, err := Status(dir)
	if err != nil {
		return err
	}
	var known []string
	for _, s := range jobs {
		known = append(known, s.Job)
		if s.Job != job && s.SlurmJob != job {
			continue
		}
		if s.SlurmJob != "" && (s.State == StateSubmitted || s.Host != hostname()) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if out, err := exec.CommandContext(ctx, "scancel", s.SlurmJob).CombinedOutput(); err != nil {
				return fmt.Errorf("stop %s: scancel %s: %v: %s", job, s.SlurmJob, err, strings.TrimSpace(string(out)))
			}
			return nil
		}
		if !s.Active() {
			return fmt.Errorf("stop %s: the job is not running (%s)", job, s.State)
		}
		if s.Host != hostname() {
			return fmt.Errorf("stop %s: it runs on %s; run monarch stop there", job, s.Host)
		}
		// Checked just now by Status: the pid is still the job's process,
		// not a later one that got the same pid.
		if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil {
			return fmt.Errorf("stop %s: signal process %d: %w", job, s.PID, err)
		}
		for end := time.Now().Add(grace + 5*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if !s.Alive() {
				return nil
			}
		}
		return fmt.Errorf("stop %s: process %d still running %v after SIGTERM", job, s.PID, grace+5*time.Second)
	}
	if len(known) == 0 {
		return fmt.Errorf("stop %s: no such job (no jobs in %s)", job, dir)
	}
	return fmt.Errorf("stop %s: no such job; known jobs: %s", job, strings.Join(known, ", "))
}

// countsSubject is where the client reports its counts.
func countsSubject(job string) string { return bus.JobSubject(job, bus.SubjectCounts) }
