package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// DefaultGrace is how long an interrupted client has to stop its procs and
// exit before it is killed.
const DefaultGrace = 10 * time.Second

// RunConfig describes a job to run.
type RunConfig struct {
	Job     *hostsconfig.Job
	JobPath string // the job file, for re-running under salloc/sbatch
	// Hosts is where it runs; nil means this machine, one host.
	Hosts *hostsconfig.Hosts
	// HostsPath is the hosts file, handed to the client as jobenv.HostsVar.
	HostsPath string
	// Detach leaves the job to run and returns once it is submitted (to
	// the scheduler's queue) or started (here, as a launcher of its own):
	// see detach.go. Rerun is the monarch command line, command first
	// ("run", flags, the job file's absolute path), that runs the job in
	// the foreground from the current directory: what a detached job or
	// salloc runs.
	Detach bool
	Rerun  []string
	// JobID is the id the job runs under: one a detached submit gave it
	// (monarch run --job-id), whose record the run takes over; "" for a
	// new one.
	JobID string
	// After are the jobs this one waits for before it starts (--after,
	// --after-ok, --after-any; see after.go).
	After []Dependency
	// ArrayJob, when set, makes this run task ArrayIndex of the array
	// ArrayJob (see array.go): its id is jobstate.TaskID(ArrayJob,
	// ArrayIndex), its env and args the job's with the task's own.
	ArrayJob   string
	ArrayIndex int
	// JobName names the job in the scheduler's queue (Slurm's job name);
	// default the job file's name without .toml, else the program's.
	JobName string
	// Output is where a detached job's output goes; default
	// OutputPath(StateDir, job).
	Output string
	// Monarch is the monarch binary the agents run; default the hosts
	// file's, else this one.
	Monarch string
	// Self is the monarch binary on this machine, the client of an SPMD
	// job (`monarch spmd`); default this one.
	Self string
	// StateDir keeps the jobs' state for status and stop; default
	// DefaultStateDir().
	StateDir string
	// Stdout and Stderr receive the program's output (default os.Stdout,
	// os.Stderr); Progress receives the launcher's own lines (default
	// os.Stderr).
	Stdout, Stderr, Progress io.Writer
	// Grace: see DefaultGrace.
	Grace time.Duration
}

// Run runs a job: submitted to its scheduler's queue (Detach), run by
// the scheduler first (salloc), or here (runJob). It returns the client's
// exit status.
func Run(ctx context.Context, cfg RunConfig) (int, error) {
	if cfg.Job == nil {
		return 0, errors.New("launch: run: no job")
	}
	defaultState := cfg.StateDir == ""
	cfg.defaults()
	if err := stepAround(&cfg, defaultState); err != nil {
		return 0, err
	}
	k, err := kindOf(cfg.Hosts)
	if err != nil {
		return 0, err
	}
	var jobs []*JobState
	if len(cfg.After) > 0 {
		if jobs, err = Status(ctx, cfg.StateDir); err != nil {
			return 0, err
		}
		if err := resolveAfter(&cfg, jobs); err != nil {
			return 0, err
		}
	}
	if cfg.ArrayJob != "" {
		if err := asTask(&cfg); err != nil {
			return 0, err
		}
	} else if cfg.Job.Array != nil {
		return startArray(ctx, &cfg, k, jobs)
	}
	s := k.open(cfg.Hosts)
	p, err := s.prepare(ctx)
	if err != nil {
		return 0, err
	}
	if cfg.Monarch == "" {
		cfg.Monarch = p.monarch
	}
	if cfg.Monarch == "" || cfg.Self == "" {
		exe, err := os.Executable()
		if err != nil {
			return 0, fmt.Errorf("launch: find the monarch binary: %w", err)
		}
		if cfg.Monarch == "" {
			cfg.Monarch = exe
		}
		if cfg.Self == "" {
			cfg.Self = exe
		}
	}
	if cfg.Detach {
		return 0, detach(ctx, &cfg, k, jobs)
	}
	if len(cfg.After) > 0 {
		// Here, the launcher waits: salloc has no --kill-on-invalid-dep,
		// and ssh and local hosts no queue.
		if code, ok, err := awaitAfter(ctx, &cfg, k.name); !ok {
			return code, err
		}
		if p.elsewhere != nil {
			// The job runs under its id in the allocation.
			cfg.Rerun = withJobID(cfg.rerun(), cfg.JobID)
		}
	}
	if p.elsewhere != nil {
		code, err := p.elsewhere(ctx, &cfg)
		if len(cfg.After) > 0 {
			neverRan(cfg.StateDir, cfg.JobID, err)
		}
		return code, err
	}
	return runJob(ctx, &cfg, k, s, p)
}

// neverRan records the end of a job that waited here and then was to run
// elsewhere (under salloc) but never ran: its record is still this
// launcher's.
func neverRan(dir, job string, err error) {
	jobstate.Amend(dir, job, func(r *JobState) bool {
		if !r.Active() || r.PID != os.Getpid() {
			return false // the job's own launcher took it over
		}
		r.State, r.Exit, r.Ended, r.End = StateFailed, 1, time.Now(), "failed: it never ran"
		if err != nil {
			r.End = "failed: " + strings.TrimPrefix(err.Error(), "launch: ")
		}
		return true
	})
}

// jobName is the job's name in a scheduler's queue: JobName, else the
// job file's name without .toml, else the program's name.
func (cfg *RunConfig) jobName() string {
	switch {
	case cfg.JobName != "":
		return cfg.JobName
	case cfg.JobPath != "":
		return strings.TrimSuffix(filepath.Base(cfg.JobPath), filepath.Ext(cfg.JobPath))
	}
	if f := strings.Fields(programOf(cfg.Job)); len(f) > 0 {
		return filepath.Base(f[0])
	}
	return "monarch"
}

// rerun is the command line that runs the job in the foreground:
// Rerun, else monarch run of its job file.
func (cfg *RunConfig) rerun() []string {
	if len(cfg.Rerun) == 0 {
		return []string{"run", cfg.JobPath}
	}
	return cfg.Rerun
}

func (cfg *RunConfig) defaults() {
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Progress == nil {
		cfg.Progress = os.Stderr
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Job.StopGrace <= 0 {
		// A job made up on the command line (monarch local -- ...) has
		// the job file's default.
		cfg.Job.StopGrace = hostsconfig.DefaultStopGrace
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir()
	}
}

// runJob runs the job from here: the bus, the host agents (started by s
// on the hosts of p), then the client. It tears everything down when the
// client ends or on SIGINT/SIGTERM, and records how the job ended.
func runJob(ctx context.Context, cfg *RunConfig, k kind, s scheduler, p *placement) (int, error) {
	var busCfg hostsconfig.Bus
	if cfg.Hosts != nil {
		busCfg = cfg.Hosts.Bus
	}
	jobID := cfg.JobID
	if jobID == "" {
		var err error
		if jobID, err = jobstate.NewID(); err != nil {
			return 0, fmt.Errorf("launch: %w", err)
		}
	}
	jb, err := startJobBus(ctx, busCfg, p, jobID)
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	defer jb.srv.Shutdown()
	var sampleNow func()
	if os.Getenv(MetricsVar) != "" {
		var stop func()
		sampleNow, stop = jb.watchInterest(cfg.Progress, jobID)
		defer stop()
	}
	st, err := startRecord(cfg, jobID, k.name)
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	fail := func(err error) { endRecord(st, StateFailed, 1, "failed: "+err.Error(), nil) }
	progressTo := cfg.Progress
	if len(p.hosts) == 0 {
		progressTo = io.Discard // a program on this machine, no hosts to report
	}
	prog := newProgress(progressTo, jobID, batchText(st), k.name, len(p.hosts))
	watch, err := watchJob(jb.srv, jobID, prog, st, sampleNow)
	if err != nil {
		fail(err)
		return 0, err
	}
	defer watch.close()

	env := jobEnv(cfg.Job)
	health := hostsconfig.DefaultHealth()
	if cfg.Hosts != nil && cfg.Hosts.Health != (hostsconfig.Health{}) {
		health = cfg.Hosts.Health
	}
	env.Health = &health
	var ag *agents
	if len(p.hosts) > 0 {
		links, err := startLinkWatch(jb, health, watch.conn, jobID)
		if err != nil {
			fail(err)
			return 0, fmt.Errorf("launch: %w", err)
		}
		defer links.close()
		spec := &agentSpec{args: agentArgs(jobID, cfg.Job), monarch: cfg.Monarch, stderr: cfg.Stderr, awaitAgents: watch.awaitHosts,
			env: jobenv.Env{Bus: jb.dial(jb.advURL, jb.leafAdv), FileLog: env.FileLog, StderrLog: env.StderrLog,
				Health: &health, LinkWatcher: links.addr}}
		if spec.env.SealedEnv, err = jobenv.SealEnv(spec.env.Bus.Token, procVars(cfg.Job)); err != nil {
			err = fmt.Errorf("launch: %w", err)
			fail(err)
			return 0, err
		}
		if spec.ship, err = newShipment(cfg, cfg.Progress); err != nil {
			err = fmt.Errorf("launch: %w", err)
			fail(err)
			return 0, err
		}
		spec.args.ProgramSum = spec.ship.programSum() // the agents run the program only if it has it
		if ag, err = s.start(ctx, p, spec); err != nil {
			if code, ok := stoppedWhileStarting(ctx, cfg.StateDir, jobID, p, st, prog); ok {
				return code, nil
			}
			err = fmt.Errorf("launch: %w", err)
			fail(err)
			return 0, err
		}
		env.HostAgents = len(p.hosts)
	}
	env.Job, env.Bus, env.HostsFile = jobID, jb.dial(jb.localURL, jb.leafLocal), cfg.HostsPath
	env.StopGrace, env.JobEnd = cfg.Job.StopGrace, p.jobEnd
	client, reports, err := startClient(cfg, env, watch.conn)
	if err != nil {
		ag.stop(cfg.Grace)
		fail(err)
		return 0, err
	}
	if reports != nil {
		reports.record(st)
	}
	st.Update(func(r *JobState) { r.State = StateRunning })
	// A scheduler that ends the job gives the launcher little time
	// (Slurm: KillWait, 30 s by default) before it kills it: the record
	// says why at once, in case the launcher cannot record its end.
	stopping := make(chan struct{})
	defer close(stopping)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopping:
			return
		}
		if c := schedulerEnding(context.WithoutCancel(ctx), p); c != "" {
			st.Update(func(r *JobState) { r.End = c })
		}
	}()

	// An agent's process that ends before every agent has reported is the
	// launcher's failure to report, in the scheduler's own words; after,
	// the client is told (see jobWatch.agentGone), unless the scheduler
	// is ending the job (scancel, a time limit): then that is the news.
	failed, ending := false, ""
	times := stopTimes{grace: cfg.Grace, stop: cfg.Job.StopGrace}
	if at := warnAt(p, cfg.Hosts); !at.IsZero() {
		timer := time.NewTimer(time.Until(at))
		defer timer.Stop()
		times.warn = timer.C
	}
	code, stopped, err := superviseClient(ctx, client, times, ag.endings(), func(e agentEnd) error {
		if ending == "" {
			ending = schedulerEnding(ctx, p)
		}
		if ending != "" {
			if !failed {
				// The client is told to stop (its program gets a
				// PreemptNotice) rather than find its hosts lost.
				st.Update(func(r *JobState) { r.End = ending })
				fmt.Fprintf(cfg.Progress, "monarch: %s: the scheduler is ending the job; stopping it\n", ending)
				client.Signal(syscall.SIGTERM)
				time.AfterFunc(cfg.Job.StopGrace+cfg.Grace, client.Kill)
			}
			failed = true
			return nil
		}
		if !failed && watch.hostsUp() < len(p.hosts) {
			failed = true
			// What srun or ssh said goes below the cause, here; the
			// launcher's last line says it again, short.
			fmt.Fprintf(cfg.Progress, "monarch: host agents could not start: %s%s\n", e, e.said())
			return Reported{fmt.Errorf("launch: host agents could not start: %s", e)}
		}
		watch.agentGone(cfg.Progress, e)
		return nil
	})
	reports.close() // its last reports are in the record before its end
	ag.stop(cfg.Grace)
	end := endOf(ctx, cfg.StateDir, jobID, p, ending, code, stopped, err, watch.failure())
	state := StateDone
	switch {
	case end.stopped:
		state = StateStopped // asked to (monarch stop, Ctrl-C, scancel, a time limit): not a failure
	case code != 0 || err != nil:
		state = StateFailed
	}
	endRecord(st, state, code, end.text, watch.failure())
	prog.done(end.text)
	return code, err
}

// stoppedWhileStarting records the end of a job asked to stop (monarch
// stop, a signal: ctx ended) while its agents were starting, whose start
// then failed for that reason: stopped, as it was asked, not failed. It
// reports false when the job was not asked to stop.
func stoppedWhileStarting(ctx context.Context, dir, job string, p *placement, st *jobstate.Writer, prog *progress) (int, bool) {
	if ctx.Err() == nil {
		return 0, false
	}
	code := 128 + int(syscall.SIGTERM)
	var sig StopSignal
	if errors.As(context.Cause(ctx), &sig) {
		if n, ok := sig.Signal.(syscall.Signal); ok {
			code = 128 + int(n)
		}
	}
	end := endOf(ctx, dir, job, p, "", code, true, nil, nil)
	endRecord(st, StateStopped, code, end.text, nil)
	prog.done(end.text)
	return code, true
}

// agentArgs is the agent command line of a job, but for the index and
// the secret's way, which each scheduler sets. The procs' variables are
// not on it (see procVars).
func agentArgs(jobID string, job *hostsconfig.Job) jobenv.AgentArgs {
	args := jobenv.AgentArgs{Job: jobID, Index: -1, Program: job.Program, Args: job.Args, Dir: job.Dir}
	if job.SPMD != nil {
		// Every proc the agents start runs the command.
		args.Program, args.Args = job.SPMD.Command[0], job.SPMD.Command[1:]
	}
	return args
}

// procVars are the variables the job's client and procs get from the
// launcher: the job file's [env], and what every process, SPMD commands
// included, can tell: a restart, the feed turned off. They hold secrets:
// the client gets them in its environment, the host agents sealed under
// the job's token (jobenv.SealEnv), never on a command line.
func procVars(job *hostsconfig.Job) []string {
	vars := append(slices.Clip(job.Env), jobenv.RestartVar+"="+strconv.Itoa(restarts()))
	if job.FeedOff != "" {
		vars = append(vars, jobenv.FeedVar+"=off")
	}
	return vars
}

// restarts is how many times this job ran before: its Slurm batch job's
// requeues (SLURM_RESTART_COUNT), else 0.
func restarts() int {
	n, err := strconv.Atoi(os.Getenv("SLURM_RESTART_COUNT"))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// warnAt is when the client is warned of the job's time limit: [slurm]
// signal_before ahead of the end the scheduler gave p; zero for none.
func warnAt(p *placement, hosts *hostsconfig.Hosts) time.Time {
	before := hostsconfig.DefaultSignalBefore
	if hosts != nil && hosts.Slurm != nil {
		before = hosts.Slurm.SignalBefore
	}
	if p.jobEnd.IsZero() || before <= 0 {
		return time.Time{}
	}
	return p.jobEnd.Add(-before)
}

// programOf is what a job runs, as status shows it: its program, or an
// SPMD job's command.
func programOf(job *hostsconfig.Job) string {
	if job.SPMD != nil {
		return strings.Join(job.SPMD.Command, " ")
	}
	return job.Program
}

// jobEnv is what the job file says to the processes the launcher starts:
// its [log] system log levels (to all), and to the client its [procs]
// and how it takes the procs' output. The environment, when it sets a
// level, wins (see jobenv.Env.Environ).
func jobEnv(job *hostsconfig.Job) jobenv.Env {
	l := job.Log
	if l == (hostsconfig.Log{}) {
		l = hostsconfig.Log{StreamToClient: true} // a job made up on the command line
	}
	stream := l.StreamToClient
	env := jobenv.Env{Procs: job.Procs, LogStream: &stream, LogWindow: l.AggregateWindow, FileLog: l.FileLevel, StderrLog: l.StderrLevel,
		ExecOff: job.ExecOff, Dashboard: job.Dashboard.Address, DashboardAt: job.Dashboard.At}
	if env.Dashboard == "" {
		// The file says nothing: the user's $MONARCH_DASHBOARD, which the
		// environment the client inherits leaves out (jobenv.Clean).
		env.Dashboard = os.Getenv(jobenv.DashboardVar)
	}
	return env
}
