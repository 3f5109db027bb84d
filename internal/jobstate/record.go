// Package jobstate is the job store's record of each job: one JSON file per
// job, <dir>/<job>.json, beside the job's log (<job>.log, see logagg), in
// the state directory (hostsconfig.StateDir: ~/.monarch/jobs). Whoever
// runs the job writes it: the launcher (monarch run, monarch local), or,
// for a program run directly (go run ., ./prog), its client. `monarch
// status` lists the records, `monarch stop` signals the process a record
// names, `monarch clean` removes the records and logs of ended jobs.
//
// A record is replaced atomically (a new file renamed over the old), so a
// reader never sees half of one. The writer of a running job updates it as
// hosts and procs come and go, at most every MinInterval. A writer that is
// killed cannot record its end: List then finds its process gone (pid and
// process start time, so a reused pid does not keep it alive) and shows
// the job as lost.
package jobstate

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/privfs"
	"github.com/monarch-go/monarch/internal/procid"
)

// Job states.
const (
	Submitted = "submitted" // sbatch accepted it; the batch job runs monarch run
	Starting  = "starting"
	Running   = "running"
	Done      = "done"    // ended with status 0
	Failed    = "failed"  // ended with another status, or could not start
	Stopped   = "stopped" // ended because it was asked to (monarch stop, Ctrl-C, scancel)
	Lost      = "lost"    // its process is gone without recording how the job ended (killed)
	// Pending waits to start, in a launcher of this host: for the jobs it
	// runs after (After), or for a place under its array's bound. A job
	// that waits in a scheduler's queue is Submitted.
	Pending = "pending"
)

// Direct is the Scheduler of a program run without a launcher.
const Direct = "direct"

// Record is what the store keeps about one job.
type Record struct {
	Job       string `json:"job"`
	Scheduler string `json:"scheduler"` // slurm, ssh, local, or direct
	Program   string `json:"program"`
	State     string `json:"state"`
	Exit      int    `json:"exit"`
	// PID is the process that runs the job here: the launcher, or the
	// client of a direct run; PIDStart its start time (see procid), Host
	// where it runs.
	PID      int    `json:"pid,omitempty"`
	PIDStart string `json:"pid_start,omitempty"`
	Host     string `json:"launcher_host"`
	// Batch names the scheduler whose queue holds the batch job BatchID
	// that this job is, or runs in: the job submitted for it (--detach),
	// or the allocation its launcher runs in. Status asks that scheduler
	// about it (BatchState); stop cancels it there.
	Batch   string `json:"batch,omitempty"`
	BatchID string `json:"batch_id,omitempty"`
	// Hosts and Procs are up now (hosts with procs running, procs
	// running); MaxHosts and MaxProcs the most there were at once.
	Hosts    int       `json:"hosts"`
	Procs    int       `json:"procs"`
	MaxHosts int       `json:"max_hosts,omitempty"`
	MaxProcs int       `json:"max_procs,omitempty"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitzero"`
	// End says how the job ended, in a few words a user reads: "done",
	// "cancelled by scancel", "time limit", "preempted", "stopped by
	// monarch stop", "failed: rank 3 on h2 exited with status 1"; "" while
	// it runs and in older records.
	End string `json:"end,omitempty"`
	// Failure is what failed, when the job's client said (see Failure).
	Failure *Failure `json:"failure,omitempty"`
	// Restarts is how many times the scheduler ran the job again (a
	// requeue); Output, where the launcher's own output goes when it runs
	// detached (the batch job's output).
	Restarts int    `json:"restarts,omitempty"`
	Output   string `json:"output,omitempty"`
	// SPMDRestarts are the restarts of an SPMD job's ranks in this run
	// ([spmd] max_restarts), oldest first, at most MaxTail of them (the
	// last): each says which it was, of how many allowed, and why.
	SPMDRestarts []SPMDRestart `json:"spmd_restarts,omitempty"`
	// StopGrace is the job's stop_grace: how long a stop waits for its
	// program before its procs are stopped; 0 in older records.
	StopGrace time.Duration `json:"stop_grace,omitempty"`
	// After are the jobs this one waits for before it starts (monarch
	// run --after, --after-ok, --after-any).
	After []Dependency `json:"after,omitempty"`
	// Array, on an array's own record, is its spec in sbatch's --array
	// syntax ("0-15%4"); each of its tasks is a job of its own, with a
	// record of its own under TaskID(Job, index).
	Array string `json:"array,omitempty"`
	// ArrayJob and ArrayIndex, on a task's record, are the array it is a
	// task of and its index there.
	ArrayJob   string `json:"array_job,omitempty"`
	ArrayIndex int    `json:"array_index,omitempty"`

	// BatchState is what the Batch scheduler says of a submitted job
	// ("pending", "finished", "" when unknown); set by whoever lists,
	// never stored.
	BatchState string `json:"-"`
	// Updated is when the record was last written (its file's time).
	Updated time.Time `json:"-"`
}

// Failure is what a job's client reports of the failure that ends it:
// the proc or actor that failed, where, and how.
type Failure struct {
	// Summary is one line: "rank 3 on h2 exited with status 1".
	Summary string `json:"summary"`
	// Mesh and Rank name the member that failed (Rank -1: none); Host is
	// its host's name (a hostname, not an agent index).
	Mesh string `json:"mesh,omitempty"`
	Rank int    `json:"rank"`
	Host string `json:"host,omitempty"`
	// Exit is its exit status, Signal the signal that ended it ("" for
	// none).
	Exit   int    `json:"exit,omitempty"`
	Signal string `json:"signal,omitempty"`
	// Tail is the last lines it wrote to stderr (at most MaxTail).
	Tail []string `json:"tail,omitempty"`
}

// SPMDRestart is one restart of an SPMD job's ranks: every rank was
// stopped and started again because one failed.
type SPMDRestart struct {
	// Restart counts it (1 for the first), of at most MaxRestarts.
	Restart     int `json:"restart"`
	MaxRestarts int `json:"max_restarts"`
	// Summary is the failure that caused it: "rank 1 on h0 exited with
	// status 1".
	Summary string    `json:"summary"`
	Time    time.Time `json:"time"`
}

// Dependency is a job another waits for, and what it waits for, in
// Slurm's words (sbatch --dependency).
type Dependency struct {
	Kind string `json:"kind"` // AfterStart, AfterOK or AfterAny
	Job  string `json:"job"`
}

// Dependency kinds.
const (
	AfterStart = "after"    // once Job has started (or ended without starting)
	AfterOK    = "afterok"  // once Job has ended with status 0; never if it failed
	AfterAny   = "afterany" // once Job has ended, however it ended
)

// TaskID is the id of the task of an array: the array's id and the
// task's index, joined as Slurm joins them (8_3).
func TaskID(array string, index int) string { return fmt.Sprintf("%s_%d", array, index) }

// MaxTail bounds Failure.Tail.
const MaxTail = 20

// Active reports whether the job may still run.
func (r *Record) Active() bool {
	switch r.State {
	case Starting, Running, Pending:
		return true
	case Submitted:
		return r.BatchState != "finished"
	}
	return false
}

// UnmarshalJSON reads a record, also as earlier versions wrote it: their
// slurm_job is the BatchID of a Slurm batch job.
func (r *Record) UnmarshalJSON(b []byte) error {
	type plain Record // without this method
	var v struct {
		plain
		SlurmJob string `json:"slurm_job"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Record(v.plain)
	if r.BatchID == "" && v.SlurmJob != "" {
		r.Batch, r.BatchID = "slurm", v.SlurmJob
	}
	return nil
}

// EndTime is when the job ended, or, for a lost job, when its record was
// last written.
func (r *Record) EndTime() time.Time {
	if !r.Ended.IsZero() {
		return r.Ended
	}
	return r.Updated
}

// Path is the record's file in dir.
func Path(dir, job string) string { return filepath.Join(dir, job+".json") }

// Save writes r to dir, replacing the job's previous record atomically.
// It creates dir (0700) if needed, and refuses a dir that is not private
// (see privfs.Dir).
func Save(dir string, r *Record) error {
	if err := checkJob(r.Job); err != nil {
		return err
	}
	if err := privfs.Dir(dir); err != nil {
		return fmt.Errorf("job state: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("job state: %w", err)
	}
	if err := privfs.WriteFile(dir, r.Job+".json", append(b, '\n')); err != nil {
		return fmt.Errorf("job state: %w", err)
	}
	return nil
}

// checkJob refuses job names that would leave dir or hide the file.
func checkJob(job string) error {
	if job == "" || strings.ContainsAny(job, `/\`+"\x00") || job[0] == '.' {
		return fmt.Errorf("job state: bad job name %q", job)
	}
	return nil
}

// Load reads one record, checked as List checks them.
func Load(dir, job string) (*Record, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	r, err := load(Path(dir, job))
	if err != nil {
		return nil, err
	}
	r.refresh(hostname())
	return r, nil
}

// maxRecord bounds what is read of a record file: a real one is well
// under a KiB.
const maxRecord = 64 << 10

func load(path string) (*Record, error) {
	f, err := privfs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRecord {
		return nil, fmt.Errorf("job state %s: larger than %d bytes", path, maxRecord)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("job state %s: %w", path, err)
	}
	r.Updated = fi.ModTime()
	return &r, nil
}

// List returns the records in dir, newest first, with the state of jobs
// whose process is gone corrected to Lost: those of this host whose
// process has exited (or whose pid now belongs to another process).
// Records that cannot be read are skipped. A missing dir has none; a dir
// that is not private is an error.
func List(dir string) ([]*Record, error) {
	if err := privfs.CheckDir(dir); err != nil {
		return nil, fmt.Errorf("job state: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job state: %w", err)
	}
	host := hostname()
	var recs []*Record
	for _, e := range entries {
		job, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() || checkJob(job) != nil {
			continue
		}
		r, err := load(filepath.Join(dir, e.Name()))
		if err != nil || r.Job != job {
			continue
		}
		r.refresh(host)
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Started.Equal(recs[j].Started) {
			return recs[i].Started.After(recs[j].Started)
		}
		return recs[i].Job < recs[j].Job
	})
	return recs, nil
}

// refresh marks a running job of this host lost when its process is gone.
func (r *Record) refresh(host string) {
	if (r.State == Starting || r.State == Running || r.State == Pending) && r.Host == host && r.PID > 0 && procid.Gone(r.PID, r.PIDStart) {
		r.State = Lost
		r.Hosts, r.Procs = 0, 0
	}
}

// Alive reports whether the process the record names still runs: false
// when it has exited or its pid was given to another process. Only a
// process of this host can be checked; for another host's it is true.
func (r *Record) Alive() bool {
	if r.Host != hostname() {
		return true
	}
	return !procid.Gone(r.PID, r.PIDStart)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// Self fills in the process fields for the calling process: its pid, the
// pid's start time, this host.
func (r *Record) Self() { r.Of(os.Getpid()) }

// Amend applies fn to job's record in dir and saves it when fn says to:
// for a process that is not the job's writer (the submitter of a detached
// job, which names the batch job it got, or the process it started). fn
// sees the record as it is now, so it can leave alone one the job's own
// launcher has taken over; the window between the read and the write is
// a file rename, far shorter than a launcher's start.
func Amend(dir, job string, fn func(*Record) bool) error {
	r, err := Load(dir, job)
	if err != nil {
		return err
	}
	if !fn(r) {
		return nil
	}
	return Save(dir, r)
}

// Of fills in the process fields for process pid of this host.
func (r *Record) Of(pid int) {
	r.PID = pid
	r.PIDStart = procid.Start(pid)
	r.Host = hostname()
}

// EnvIDPrefix names the variable whose value starts every job id made by
// NewID: letters, digits, '-' and '_', at most 32 of them. It tells a
// group of jobs apart (those of one CI run, say).
const EnvIDPrefix = "MONARCH_JOB_PREFIX"

// NewID returns a fresh job id: short, unique, and safe in a file name and
// a NATS subject: $MONARCH_JOB_PREFIX, "j", the time, 6 random letters.
func NewID() (string, error) {
	prefix := os.Getenv(EnvIDPrefix)
	if len(prefix) > 32 || strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return "", fmt.Errorf("%s=%q: want at most 32 letters, digits, '-' or '_'", EnvIDPrefix, prefix)
	}
	return fmt.Sprintf("%sj%x%s", prefix, time.Now().Unix()&0xffffff, rand.Text()[:6]), nil
}
