package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
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
	StatePending   = jobstate.Pending
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
// it runs in, if any, and keeps the record as the job runs. A job
// submitted detached has its record already, under the same id: the run
// takes it over (a requeued batch job's run too, counting the restart).
// A task of an array takes over the record its array wrote, but starts
// now; one of this host's arrays that was stopped meanwhile does not
// start.
func startRecord(cfg *RunConfig, jobID, sched string) (*jobstate.Writer, error) {
	dir := cfg.StateDir
	rec := JobState{Job: jobID, Scheduler: sched, Program: programOf(cfg.Job), State: StateStarting, Started: time.Now(), StopGrace: cfg.Job.StopGrace,
		ArrayJob: cfg.ArrayJob, ArrayIndex: cfg.ArrayIndex}
	if old, err := jobstate.Load(dir, jobID); err == nil {
		if cfg.ArrayJob != "" && old.Batch == "" && (old.State == StateStopped || old.State == StateDone) {
			// Stopped while its array's launcher was starting it: it
			// does not run. (A queue's task may run again: a requeue.)
			return nil, fmt.Errorf("task %s: %s", jobID, old.End)
		}
		if cfg.ArrayJob == "" {
			rec.Started = old.Started
		}
		rec.Output, rec.After = old.Output, old.After
		rec.MaxHosts, rec.MaxProcs = old.MaxHosts, old.MaxProcs
	}
	rec.Batch, rec.BatchID = enclosingBatch()
	rec.Restarts = restarts()
	rec.Self()
	return jobstate.NewWriter(dir, rec)
}

// endRecord records how the job ended, with nothing of it up any more.
func endRecord(st *jobstate.Writer, state string, exit int, end string, f *jobstate.Failure) {
	st.Finish(func(r *JobState) {
		r.State, r.Exit, r.Hosts, r.Procs, r.End, r.Failure = state, exit, 0, 0, end, f
	})
}

// batchText names the batch job a record's job runs in ("Slurm job 8"),
// "" for none.
func batchText(st *jobstate.Writer) string {
	var text string
	st.Update(func(r *JobState) {
		if r.BatchID != "" {
			text = fmt.Sprintf("%s job %s", kinds[r.Batch].title, r.BatchID)
		}
	})
	return text
}

// Status lists the jobs in dir, newest first. Jobs whose process is gone
// show as lost (see jobstate.List). A job in a scheduler's queue carries
// what the queue says of it in BatchState while it waits there, or when
// its launcher runs on another host (it may have gone without recording
// its end: the queue then says how it ended).
func Status(ctx context.Context, dir string) ([]*JobState, error) {
	jobs, err := jobstate.List(dir)
	if err != nil {
		return nil, err
	}
	arrays := newArrayQueue(jobs)
	for _, s := range jobs {
		q := batchQueue(s)
		if q == nil || s.Array != "" || !(s.State == StateSubmitted || s.Active() && s.Host != hostname()) {
			continue // a batch array's own record: its tasks say (settle)
		}
		b, ok := arrays.state(ctx, s)
		if !ok {
			b = q.state(ctx, s.BatchID)
		}
		s.BatchState = b.State
		switch {
		case b.State == "pending" && b.Reason != "":
			s.BatchState += " (" + b.Reason + ")"
		case b.State == "finished" && s.State == StateSubmitted:
			// Ended in the queue before its launcher ran.
			s.State, s.End = StateStopped, b.Cause
			if b.Reason == slurmNeverSatisfied {
				s.End = neverSatisfied(s.After, jobs)
			}
			if s.End == "" {
				s.End = "ended before it ran"
			}
		case b.State == "finished":
			// Its launcher ran elsewhere and never recorded its end
			// (killed by the scheduler, most likely), though it may
			// have said why it was ending.
			switch {
			case s.End != "":
				s.State = StateStopped
			case b.Cause != "":
				s.State, s.End = StateStopped, b.Cause
			default:
				s.State = StateLost
			}
		default:
			continue
		}
		// Kept: the queue forgets ended jobs.
		if !s.Active() {
			state, end := s.State, s.End
			jobstate.Amend(dir, s.Job, func(r *JobState) bool {
				if !r.Active() && r.State != StateSubmitted {
					return false // its launcher recorded the end meanwhile
				}
				r.State, r.End, r.Hosts, r.Procs = state, end, 0, 0
				if r.Ended.IsZero() {
					r.Ended = time.Now()
				}
				return true
			})
		}
	}
	arrays.settle(dir, jobs)
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

// Find returns the job that ref names in jobs: its id, its batch job's id
// (Slurm's job id), or the batch job's id as earlier versions named
// submitted jobs (slurm-8). A ref that names no job is an error that
// lists the jobs there are.
//
// A task of an array is named by its id (ID_3), as ID:3, or by Slurm's
// name for it (ARRAYID_3, the batch array's id and the index).
func Find(jobs []*JobState, dir, ref string) (*JobState, error) {
	if j := find(jobs, ref); j != nil {
		return j, nil
	}
	if array, i, ok := taskRef(ref); ok {
		if a := find(jobs, array); a != nil && a.Array != "" {
			if j := find(jobs, jobstate.TaskID(a.Job, i)); j != nil {
				return j, nil
			}
			return nil, fmt.Errorf("no task %d in array %s (%s); monarch status %[2]s lists its tasks", i, a.Job, a.Array)
		}
	}
	return nil, NoJobError{Ref: ref, Dir: dir, Jobs: jobs}
}

// find is the job whose id, or batch job's id, is ref; nil for none. A
// batch array's id names the array, though Slurm gives one of its tasks
// the same id.
func find(jobs []*JobState, ref string) *JobState {
	for _, j := range jobs {
		if j.Job == ref {
			return j
		}
	}
	var found *JobState
	for _, j := range jobs {
		if j.BatchID != "" && (j.BatchID == ref || j.Batch+"-"+j.BatchID == ref) && (found == nil || j.Array != "") {
			found = j
		}
	}
	return found
}

// NoJobError is a reference to a job that is not in the job store.
type NoJobError struct {
	Ref, Dir string
	Jobs     []*JobState
}

func (e NoJobError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no job %q", e.Ref)
	if strings.Trim(e.Ref, "0123456789") == "" {
		// A batch job's id that no job of this user's store ran in:
		// another user's, or one monarch did not submit.
		b.WriteString(" (as a Slurm job id: not one of this user's monarch jobs)")
	}
	if len(e.Jobs) == 0 {
		fmt.Fprintf(&b, ": there are no jobs in %s", e.Dir)
		return b.String()
	}
	fmt.Fprintf(&b, " in %s; known jobs:", e.Dir)
	jobs := slices.DeleteFunc(slices.Clone(e.Jobs), func(j *JobState) bool { return j.ArrayJob != "" }) // an array's row stands for its tasks
	for i, j := range jobs {
		if i == 10 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(jobs)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s", j.Job)
		if j.BatchID != "" {
			fmt.Fprintf(&b, " (%s job %s)", kinds[j.Batch].title, j.BatchID)
		}
		fmt.Fprintf(&b, "  %s  %s", j.State, j.Program)
	}
	return b.String()
}

// Stop stops a job (named as Find takes it): a submitted one, or one of
// another host that runs in a batch job, by cancelling the batch job; a
// running launcher (or directly run program) of this host with SIGTERM
// (it then tears its job down), waiting up to grace+5s for it to go.
// Either way it first leaves a stop request, so that the job says it was
// stopped by monarch stop.
func Stop(ctx context.Context, dir, ref string, grace time.Duration) error {
	jobs, err := Status(ctx, dir)
	if err != nil {
		return err
	}
	s, err := Find(jobs, dir, ref)
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if !s.Active() {
		return fmt.Errorf("stop %s: the job is not running (%s)", ref, s.State)
	}
	if s.ArrayJob != "" && s.State == StatePending {
		// It waits in its array's launcher, which will not start it now.
		endTask(dir, s.Job, StatePending, StateStopped, 0, "stopped by monarch stop before it ran")
		return nil
	}
	if q := batchQueue(s); q != nil && s.Array != "" {
		return stopBatchArray(ctx, dir, s, jobs, q)
	}
	if q := batchQueue(s); q != nil && (s.State == StateSubmitted || s.Host != hostname()) {
		// A running batch job's monarch run is asked to stop, as
		// SIGTERM here would: its program gets its stop grace.
		requestStop(dir, s.Job)
		if err := q.cancel(ctx, s.BatchID, s.State != StateSubmitted || strings.HasPrefix(s.BatchState, "running")); err != nil {
			return fmt.Errorf("stop %s: %w", ref, err)
		}
		if s.State == StateSubmitted {
			// No launcher runs yet to record it.
			jobstate.Amend(dir, s.Job, func(r *JobState) bool {
				if r.State != StateSubmitted {
					return false
				}
				r.State, r.End, r.Ended = StateStopped, "stopped by monarch stop before it ran", time.Now()
				return true
			})
			os.Remove(stopRequestPath(dir, s.Job))
		}
		return nil
	}
	if s.Host != hostname() {
		return fmt.Errorf("stop %s: it runs on %s; run monarch stop there", ref, s.Host)
	}
	if s.PID <= 0 {
		return fmt.Errorf("stop %s: its record names no process", ref)
	}
	requestStop(dir, s.Job)
	// Checked just now by Status: the pid is still the job's process,
	// not a later one that got the same pid.
	if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil {
		os.Remove(stopRequestPath(dir, s.Job))
		return fmt.Errorf("stop %s: signal process %d: %w", ref, s.PID, err)
	}
	wait := s.StopGrace + grace + 5*time.Second
	if s.Array != "" {
		wait += grace + 5*time.Second // its tasks' launchers stop first
	}
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if !s.Alive() {
			return nil
		}
	}
	return fmt.Errorf("stop %s: process %d still running %v after SIGTERM", ref, s.PID, wait)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
