package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
)

// Job states, as `monarch status` shows them.
const (
	StateSubmitted = "submitted" // sbatch accepted it; the batch job runs monarch run
	StateStarting  = "starting"
	StateRunning   = "running"
	StateDone      = "done"
	StateFailed    = "failed"
	StateLost      = "lost" // its launcher is gone without saying how it ended
)

// JobState is what a launcher records about its job, one file per job in
// the state directory, for `monarch status` and `monarch stop`.
type JobState struct {
	Job          string    `json:"job"`
	Scheduler    string    `json:"scheduler"`
	Program      string    `json:"program"`
	State        string    `json:"state"`
	Exit         int       `json:"exit"`
	PID          int       `json:"pid,omitempty"` // the launcher (monarch run)
	LauncherHost string    `json:"launcher_host"`
	SlurmJob     string    `json:"slurm_job,omitempty"`
	Hosts        int       `json:"hosts"`
	Procs        int       `json:"procs"`
	Started      time.Time `json:"started"`
	Ended        time.Time `json:"ended,omitzero"`

	mu    sync.Mutex
	saved time.Time
}

// DefaultStateDir is hostsconfig.StateDir().
func DefaultStateDir() string { return hostsconfig.StateDir() }

func (s *JobState) save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("launch: state dir: %w", err)
	}
	s.mu.Lock()
	b, err := json.MarshalIndent(s, "", "  ")
	s.saved = time.Now()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+s.Job+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("launch: write job state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, s.Job+".json"))
}

// update records hosts and procs up, writing at most once a second.
func (s *JobState) update(dir string, hosts, procs int) {
	s.mu.Lock()
	s.Hosts, s.Procs = hosts, procs
	due := time.Since(s.saved) > time.Second
	s.mu.Unlock()
	if due {
		s.save(dir)
	}
}

func (s *JobState) finish(dir, state string, exit int) {
	s.mu.Lock()
	s.State, s.Exit, s.Ended = state, exit, time.Now()
	s.mu.Unlock()
	s.save(dir)
}

// Status lists the jobs in dir, newest first, with the state of those
// whose launcher is gone corrected: lost if it was running on this host
// and its process is gone; for Slurm batch jobs, Slurm's own state.
func Status(dir string) ([]*JobState, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var jobs []*JobState
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var s JobState
		if json.Unmarshal(b, &s) != nil {
			continue
		}
		s.refresh()
		jobs = append(jobs, &s)
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Started.After(jobs[j].Started) })
	return jobs, nil
}

func (s *JobState) active() bool {
	return s.State == StateStarting || s.State == StateRunning || s.State == StateSubmitted
}

func (s *JobState) refresh() {
	if !s.active() {
		return
	}
	if s.State == StateSubmitted && s.SlurmJob != "" {
		if st := squeueState(s.SlurmJob); st != "" {
			s.State = StateSubmitted + " (slurm: " + strings.ToLower(st) + ")"
		} else {
			s.State = StateSubmitted + " (slurm: finished)"
		}
		return
	}
	if s.LauncherHost == hostname() && s.PID > 0 && syscall.Kill(s.PID, 0) != nil {
		s.State = StateLost
	}
}

func squeueState(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "squeue", "-h", "-j", id, "-o", "%T").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Stop stops a job: a batch job with scancel, a running launcher of this
// host with SIGTERM (it then tears its job down), waiting up to grace+5s
// for it to go.
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
		if s.SlurmJob != "" && (strings.HasPrefix(s.State, StateSubmitted) || s.LauncherHost != hostname()) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if out, err := exec.CommandContext(ctx, "scancel", s.SlurmJob).CombinedOutput(); err != nil {
				return fmt.Errorf("stop %s: scancel %s: %v: %s", job, s.SlurmJob, err, strings.TrimSpace(string(out)))
			}
			return nil
		}
		if !s.active() {
			return fmt.Errorf("stop %s: the job is not running (%s)", job, s.State)
		}
		if s.LauncherHost != hostname() {
			return fmt.Errorf("stop %s: its launcher runs on %s; run monarch stop there", job, s.LauncherHost)
		}
		if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil {
			return fmt.Errorf("stop %s: signal launcher %d: %w", job, s.PID, err)
		}
		for end := time.Now().Add(grace + 5*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if syscall.Kill(s.PID, 0) != nil {
				return nil
			}
		}
		return fmt.Errorf("stop %s: launcher %d still running %v after SIGTERM", job, s.PID, grace+5*time.Second)
	}
	if len(known) == 0 {
		return fmt.Errorf("stop %s: no such job (no jobs in %s)", job, dir)
	}
	return fmt.Errorf("stop %s: no such job; known jobs: %s", job, strings.Join(known, ", "))
}
