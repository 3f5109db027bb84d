package hostsconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/didyoumean"
)

// Job is a job file, the argument of `monarch run`: the program to run as
// the job's client, its environment, where its hosts come from and how its
// logs are handled. LoadJob fills in every default and resolves every path.
type Job struct {
	// Path is the absolute name of the job file.
	Path string
	// Program is the absolute name of the program, an executable file
	// when the job was loaded. The file names it relative to its own
	// directory.
	Program string
	// Args are the program's arguments.
	Args []string
	// Dir is the absolute name of the program's working directory:
	// default the job file's directory.
	Dir string
	// Env holds "KEY=value" entries, in the order the file writes them,
	// to add to the environment.
	Env []string
	// Hosts is the hosts file the job names, or its [hosts] table; nil
	// when it gives neither (the launcher then uses $MONARCH_HOSTS, or
	// this machine).
	Hosts *Hosts
	// Procs are the dimensions of the procs on each host, in the order
	// the file writes them, such as [{gpus 4}]; nil when not given.
	Procs []Dim
	// Log is the [log] table, defaults applied.
	Log Log
	// SPMD is the [spmd] table: a command run on every proc instead of an
	// SDK program as the client; nil when the job names a program.
	SPMD *SPMD
	// StopGrace is how long the program has to return once the job is
	// asked to stop (SIGTERM to monarch run, monarch stop, a preemption)
	// before its procs are stopped; > 0, default DefaultStopGrace.
	StopGrace time.Duration
	// ExecOff, when not empty, is where the job file turns `monarch exec`
	// off ([exec] enabled = false), as "job.toml:12": no command may then
	// be run on the job's hosts through their agents. "" (the default):
	// it may.
	ExecOff string
	// FeedOff, when not empty, is where the job file turns the job state
	// feed's counting off ([feed] enabled = false), as "job.toml:14": the
	// launcher then sets MONARCH_FEED=off for the client and every proc
	// (see jobenv.FeedVar). "" (the default): the feed counts.
	FeedOff string
	// Dashboard is the [dashboard] table: where the job's live dashboard
	// listens, or that it is off; zero when the file says nothing.
	Dashboard Dashboard
	// Array is the [array] table: the job runs as a job array, each task
	// with its own parameters; nil when the job is one run.
	Array *Array
}

// DefaultStopGrace is a job's stop_grace by default.
const DefaultStopGrace = 60 * time.Second

// SPMD is the [spmd] table of a job: what every proc runs.
type SPMD struct {
	// Command is the command line; its first word is looked up in $PATH
	// on each host, as the shell would.
	Command []string
	// GPUsDim is the dimension of [procs] whose index a proc's
	// CUDA_VISIBLE_DEVICES is; default "gpus".
	GPUsDim string
	// NoticeSignal is the signal each rank that catches it gets when the
	// job is about to end (a time limit ahead, a stop, a preemption),
	// before a stop's SIGTERM: "USR1" (the default), "USR2", "TERM",
	// "INT", "HUP", or "none".
	NoticeSignal string
	// MaxRestarts is how many times, at most, every rank is stopped and
	// started again (a new MASTER_PORT, TORCHELASTIC_RESTART_COUNT
	// counting) when one fails or a host is lost (see MinHosts), as
	// torchrun's --max-restarts; >= 0, default 0: a failure ends the
	// job.
	MaxRestarts int
	// MinHosts and MaxHosts are nnodes, torchrun's --nnodes MIN:MAX: the
	// ranks run on at most MaxHosts of the job's hosts and, when hosts
	// are lost, start again on those left, down to MinHosts (a restart,
	// counted against MaxRestarts as torchrun counts it). 0 (the
	// default): every host of the job, none of which may be lost.
	MinHosts, MaxHosts int
}

// ParseNNodes reads nnodes as torchrun's --nnodes takes it: "MIN:MAX",
// or "N", which is N:N.
func ParseNNodes(s string) (min, max int, err error) {
	lo, hi, elastic := strings.Cut(s, ":")
	min, err1 := strconv.Atoi(lo)
	max, err2 := strconv.Atoi(hi)
	if !elastic {
		max, err2 = min, err1
	}
	switch {
	case err1 != nil || err2 != nil || strings.ContainsAny(s, "+ "):
		return 0, 0, fmt.Errorf(`want MIN:MAX hosts, such as "1:4", or a number of hosts, got %q`, s)
	case min < 1:
		return 0, 0, fmt.Errorf("want at least 1 host, got %q", s)
	case max < min:
		return 0, 0, fmt.Errorf("want MIN no more than MAX, got %q", s)
	}
	return min, max, nil
}

// NoticeSignals are the values of [spmd] notice_signal.
var NoticeSignals = []string{"USR1", "USR2", "TERM", "INT", "HUP", "none"}

// Dim is one dimension of a mesh: its name and size (>= 1).
type Dim struct {
	Name string
	Size int
}

// Log is the [log] table of a job.
type Log struct {
	// StreamToClient sends the procs' output to the client; default true.
	StreamToClient bool
	// AggregateWindow, when > 0, merges similar lines from many procs
	// written within it into one; default 0, no aggregation.
	AggregateWindow time.Duration
	// FileLevel and StderrLevel are level names (see ValidLevels),
	// upper-case: what goes to the log files (default INFO) and to stderr
	// (default WARN).
	FileLevel, StderrLevel string
}

// ValidLevels is the list of level names, for messages elsewhere. It is
// a copy: changing it changes nothing here.
var ValidLevels = levels()

func levels() []string { return []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"} }

// ParseLevel normalises a level name (any case) to upper case, or returns
// an error listing the valid ones.
func ParseLevel(s string) (string, error) {
	up := strings.ToUpper(strings.TrimSpace(s))
	if slices.Contains(levels(), up) {
		return up, nil
	}
	return "", fmt.Errorf("unknown level %q: want one of %s", s, strings.Join(levels(), ", "))
}

// LoadJob reads a job file and the hosts file it names, if any. Its
// error lists every problem found in both (see ConfigError).
func LoadJob(path string) (*Job, error) {
	var errs errorList
	var j *Job
	if t := parseFile(path, &errs); t != nil && !t.isHostsFile() {
		j = readJob(t)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return j, nil
}

// Load reads a job file or a MONARCH_HOSTS file, deciding by content: a
// file that sets program is a job (*Job), one that sets scheduler a hosts
// file (*Hosts). A file that sets neither is taken for the kind its other
// keys belong to, so that a misspelt program or scheduler is reported as
// such.
func Load(path string) (any, error) {
	var errs errorList
	var v any
	if t := parseFile(path, &errs); t != nil {
		switch fileKind(t) {
		case "job":
			v = readJob(t)
		case "hosts":
			h := readHosts(t)
			h.Path = filepath.Join(t.doc.dir, filepath.Base(path))
			v = h
		default:
			errs.add(&ConfigError{File: path,
				Msg: `neither program (a job file) nor scheduler (a MONARCH_HOSTS file) is set`})
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return v, nil
}

// jobKeys and hostsKeys are the top-level keys of each kind of file.
func jobKeys() []string {
	return []string{"program", "spmd", "args", "dir", "env", "hosts", "procs", "log", "stop_grace", "exec", "feed", "dashboard", "array"}
}

func hostsKeys() []string {
	return []string{"scheduler", SchedulerSlurm, SchedulerSSH, SchedulerLocal, "bus", "health", "ship"}
}

// fileKind returns "job", "hosts" or "" for a file that gives no clue.
func fileKind(t *table) string {
	switch {
	case t.has("program"), t.has("spmd"):
		return "job"
	case t.has("scheduler"):
		return "hosts"
	}
	for _, k := range t.children() {
		switch {
		case slices.Contains(jobKeys(), k) || didyoumean.Closest(k, []string{"program"}) != "":
			return "job"
		case slices.Contains(hostsKeys(), k) || didyoumean.Closest(k, []string{"scheduler"}) != "":
			return "hosts"
		}
	}
	return ""
}

func readJob(t *table) *Job {
	j := &Job{
		Path:      filepath.Join(t.doc.dir, filepath.Base(t.doc.file)),
		Dir:       t.doc.dir,
		Log:       Log{StreamToClient: true, FileLevel: "INFO", StderrLevel: "WARN"},
		StopGrace: DefaultStopGrace,
	}
	t.unknown(jobKeys()...)
	var s string
	switch {
	case t.has("spmd") && t.has("program"):
		t.fail("spmd", "a job runs either a program built with the SDK (program) or a command on every proc ([spmd]), not both")
	case t.has("spmd"):
		j.SPMD = readSPMD(t.sub("spmd"))
		if t.has("args") {
			t.fail("args", "an [spmd] job takes its arguments in its command")
		}
	case !t.has("program"):
		t.missing("program")
	case t.str("program", &s):
		j.Program = t.program(s)
	}
	t.strings("args", &j.Args)
	if t.str("dir", &s) {
		j.Dir = t.directory(s)
	}
	if sub := t.sub("env"); sub != nil {
		j.Env = readEnv(sub)
	}
	j.Hosts = readJobHosts(t)
	if sp := j.SPMD; sp != nil && j.Hosts != nil && j.Hosts.numHosts() > 0 && sp.MaxHosts > j.Hosts.numHosts() {
		t.sub("spmd").fail("nnodes", "MAX is %d, more than the %d hosts of the job", sp.MaxHosts, j.Hosts.numHosts())
	}
	if sub := t.sub("procs"); sub != nil {
		j.Procs = readProcs(sub)
	}
	if sub := t.sub("log"); sub != nil {
		readLog(sub, &j.Log)
	}
	if t.duration("stop_grace", &j.StopGrace) && j.StopGrace <= 0 {
		t.fail("stop_grace", "want more than 0s (the program's time to return when the job is stopped), got %v", j.StopGrace)
	}
	if sub := t.sub("exec"); sub != nil {
		j.ExecOff = readExec(sub)
	}
	if sub := t.sub("feed"); sub != nil {
		j.FeedOff = readFeed(sub)
	}
	if sub := t.sub("dashboard"); sub != nil {
		j.Dashboard = readDashboard(sub)
	}
	if t.has("array") {
		j.Array = readArray(t.sub("array"), j.SPMD != nil)
	}
	return j
}

// program resolves the program key and checks that it names an
// executable file: a typo is then reported here, with the path, rather
// than as a failed start on every host.
func (t *table) program(s string) string {
	if s == "" {
		t.fail("program", "empty file name")
		return ""
	}
	p, ok := t.localPath("program", s)
	if !ok {
		return ""
	}
	hint := ""
	if !strings.Contains(s, "/") {
		hint = " (a name without \"/\" is looked up in the job file's directory, not in $PATH)"
	}
	switch fi, err := os.Stat(p); {
	case errors.Is(err, fs.ErrNotExist):
		t.fail("program", "%s does not exist%s", p, hint)
	case err != nil:
		t.fail("program", "%v", err)
	case fi.IsDir():
		t.fail("program", "%s is a directory", p)
	case fi.Mode()&0o111 == 0:
		t.fail("program", "%s is not executable", p)
	default:
		return p
	}
	return ""
}

// directory resolves the dir key and checks that it is a directory.
func (t *table) directory(s string) string {
	p, ok := t.localPath("dir", s)
	if !ok {
		return ""
	}
	switch fi, err := os.Stat(p); {
	case errors.Is(err, fs.ErrNotExist):
		t.fail("dir", "%s does not exist", p)
	case err != nil:
		t.fail("dir", "%v", err)
	case !fi.IsDir():
		t.fail("dir", "%s is not a directory", p)
	default:
		return p
	}
	return ""
}

func readSPMD(t *table) *SPMD {
	if t == nil {
		return nil
	}
	sp := &SPMD{GPUsDim: "gpus", NoticeSignal: "USR1"}
	t.unknown("command", "gpus_dim", "notice_signal", "max_restarts", "nnodes")
	switch {
	case !t.has("command"):
		t.missing("command")
	case t.strings("command", &sp.Command) && (len(sp.Command) == 0 || sp.Command[0] == ""):
		t.fail("command", `want the command and its arguments, such as ["python3", "train.py"]`)
	}
	if t.str("gpus_dim", &sp.GPUsDim) && !validDimName(sp.GPUsDim) {
		t.fail("gpus_dim", `want a dimension name of letters, digits, "_" and "-"`)
	}
	if t.str("notice_signal", &sp.NoticeSignal) && !slices.Contains(NoticeSignals, sp.NoticeSignal) {
		t.fail("notice_signal", "want one of %s", strings.Join(NoticeSignals, ", "))
	}
	if t.integer("max_restarts", &sp.MaxRestarts) && sp.MaxRestarts < 0 {
		t.fail("max_restarts", "want 0 or more (how many times every rank starts again when one fails), got %d", sp.MaxRestarts)
	}
	t.nnodes(sp)
	return sp
}

// nnodes reads [spmd] nnodes, a number of hosts or "MIN:MAX".
func (t *table) nnodes(sp *SPMD) {
	var err error
	switch v := t.m["nnodes"].(type) {
	case nil:
		return
	case int64:
		if v < 1 || v > math.MaxInt32 {
			t.fail("nnodes", "want at least 1 host, got %d", v)
			return
		}
		sp.MinHosts, sp.MaxHosts = int(v), int(v)
	case string:
		if sp.MinHosts, sp.MaxHosts, err = ParseNNodes(v); err != nil {
			t.fail("nnodes", "%v", err)
		}
	default:
		t.fail("nnodes", `want MIN:MAX hosts as a string, such as "1:4", or a number of hosts, got %s`, describeValue(v))
	}
}

func readEnv(t *table) []string {
	var env []string
	for _, k := range t.children() {
		var v string
		switch {
		case !t.has(k), !t.envName(k):
		case t.str(k, &v):
			env = append(env, k+"="+v)
		}
	}
	return env
}

// envName reports whether k is a valid environment variable name,
// recording the error when it is not.
func (t *table) envName(k string) bool {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		t.fail(k, `want a variable name without "="`)
		return false
	}
	return true
}

// readJobHosts reads the hosts key: the name of a hosts file, relative to
// the job file, or a [hosts] table.
func readJobHosts(t *table) *Hosts {
	v, ok := t.m["hosts"]
	if !ok {
		return nil
	}
	switch v := v.(type) {
	case string:
		if v == "" {
			t.fail("hosts", "empty file name")
			return nil
		}
		// Errors in the hosts file name it as the user would: relative
		// to where the job file was named from.
		name := v
		if rest, ok := strings.CutPrefix(v, "~/"); ok {
			home, err := os.UserHomeDir()
			if err != nil {
				t.fail("hosts", "cannot expand ~: %v", err)
				return nil
			}
			name = filepath.Join(home, rest)
		} else if !filepath.IsAbs(v) {
			name = filepath.Join(filepath.Dir(t.doc.file), v)
		}
		switch fi, err := os.Stat(name); {
		case errors.Is(err, fs.ErrNotExist):
			t.fail("hosts", "%s does not exist", name)
			return nil
		case err != nil:
			t.fail("hosts", "%v", err)
			return nil
		case fi.IsDir():
			t.fail("hosts", "%s is a directory, want a hosts file", name)
			return nil
		}
		return loadHosts(name, t.doc.errs)
	case map[string]any:
		return readHosts(t.sub("hosts"))
	}
	t.fail("hosts", "want the name of a hosts file or a [hosts] table, got %s", describeValue(v))
	return nil
}

func readProcs(t *table) []Dim {
	var dims []Dim
	for _, k := range t.children() {
		d := Dim{Name: k}
		switch {
		case !t.has(k):
		case !validDimName(k):
			t.fail(k, `want a dimension name of letters, digits, "_" and "-"`)
		case !t.integer(k, &d.Size):
		case d.Size < 1:
			t.fail(k, "want at least 1, got %d", d.Size)
		default:
			dims = append(dims, d)
		}
	}
	return dims
}

func validDimName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isBareKeyByte(s[i]) {
			return false
		}
	}
	return true
}

func readLog(t *table, l *Log) {
	t.unknown("stream_to_client", "aggregate_window", "file_level", "stderr_level")
	t.boolean("stream_to_client", &l.StreamToClient)
	if t.duration("aggregate_window", &l.AggregateWindow) && l.AggregateWindow < 0 {
		t.fail("aggregate_window", "want 0s (no aggregation) or more, got %v", l.AggregateWindow)
	}
	t.level("file_level", &l.FileLevel)
	t.level("stderr_level", &l.StderrLevel)
}

func (t *table) level(k string, dst *string) {
	var s string
	if !t.str(k, &s) {
		return
	}
	level, err := ParseLevel(s)
	if err != nil {
		t.fail(k, "%v", err)
		return
	}
	*dst = level
}
