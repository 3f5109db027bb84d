package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

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

// Counts is what a job's client reports to its launcher on the job's
// Counts subject (jobenv.Subjects) as its hosts and procs come and go:
// the hosts with procs running and the procs running.
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

// startRecord records a job this launcher starts to run, in the batch job
// it runs in, if any, and keeps the record as the job runs.
func startRecord(dir, jobID, sched, program string, stopGrace time.Duration) (*jobstate.Writer, error) {
	rec := JobState{Job: jobID, Scheduler: sched, Program: program, State: StateStarting, Started: time.Now(), StopGrace: stopGrace}
	rec.Batch, rec.BatchID = enclosingBatch()
	rec.Self()
	return jobstate.NewWriter(dir, rec)
}

// endRecord records how the job ended, with nothing of it up any more.
func endRecord(st *jobstate.Writer, state string, exit int) {
	st.Finish(func(r *JobState) { r.State, r.Exit, r.Hosts, r.Procs = state, exit, 0, 0 })
}

// Status lists the jobs in dir, newest first. Jobs whose process is gone
// show as lost (see jobstate.List); submitted batch jobs carry what their
// scheduler's queue says of them in BatchState.
func Status(ctx context.Context, dir string) ([]*JobState, error) {
	jobs, err := jobstate.List(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range jobs {
		if q := batchQueue(s); q != nil && s.State == StateSubmitted {
			s.BatchState = q.state(ctx, s.BatchID)
		}
	}
	return jobs, nil
}

// batchQueue is the queue that holds r's batch job; nil when there is
// none (or no scheduler of that name here).
func batchQueue(r *JobState) queue {
	if r.BatchID == "" {
		return nil
	}
	return kinds[r.Batch].queue
}

// Stop stops a job (named by its id, or its batch job's): a submitted one,
// or one of another host that runs in a batch job, by cancelling the
// batch job; a running launcher (or directly run program) of this host
// with SIGTERM (it then tears its job down), waiting up to grace+5s for it
// to go.
func Stop(ctx context.Context, dir, job string, grace time.Duration) error {
	jobs, err := Status(ctx, dir)
	if err != nil {
		return err
	}
	var known []string
	for _, s := range jobs {
		known = append(known, s.Job)
		if s.Job != job && s.BatchID != job {
			continue
		}
		if q := batchQueue(s); q != nil && (s.State == StateSubmitted || s.Host != hostname()) {
			// A running batch job's monarch run is asked to stop, as
			// SIGTERM here would: its program gets its stop grace.
			if err := q.cancel(ctx, s.BatchID, s.State != StateSubmitted || s.BatchState == "running"); err != nil {
				return fmt.Errorf("stop %s: %w", job, err)
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
		wait := s.StopGrace + grace + 5*time.Second
		for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if !s.Alive() {
				return nil
			}
		}
		return fmt.Errorf("stop %s: process %d still running %v after SIGTERM", job, s.PID, wait)
	}
	if len(known) == 0 {
		return fmt.Errorf("stop %s: no such job (no jobs in %s)", job, dir)
	}
	return fmt.Errorf("stop %s: no such job; known jobs: %s", job, strings.Join(known, ", "))
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
