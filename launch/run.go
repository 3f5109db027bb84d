package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// RunConfig describes a job to run.
type RunConfig struct {
	Job     *hostsconfig.Job
	JobPath string // the job file, for re-running under salloc/sbatch
	// Hosts is where it runs; nil means this machine, one host.
	Hosts *hostsconfig.Hosts
	// HostsPath is the hosts file, handed to the client as MONARCH_HOSTS.
	HostsPath string
	// Detach submits the job with sbatch and returns its id (Slurm only).
	Detach bool
	// Monarch is the monarch binary the agents run; default this one.
	Monarch string
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

// Run runs a job: under salloc or sbatch when it needs a Slurm allocation
// first, otherwise directly (runJob). It returns the client's exit status.
func Run(ctx context.Context, cfg RunConfig) (int, error) {
	if cfg.Job == nil {
		return 0, errors.New("launch: run: no job")
	}
	if err := cfg.defaults(); err != nil {
		return 0, err
	}
	sched := hostsconfig.SchedulerLocal
	if cfg.Hosts != nil {
		sched = cfg.Hosts.Scheduler
	}
	switch {
	case cfg.Detach && sched != hostsconfig.SchedulerSlurm:
		return 0, fmt.Errorf("launch: --detach needs a Slurm hosts file (scheduler is %q)", sched)
	case sched == hostsconfig.SchedulerSlurm && !inAllocation() && cfg.Detach:
		id, err := submit(cfg)
		if err != nil {
			return 0, err
		}
		st := &JobState{Job: "slurm-" + id, SlurmJob: id, Scheduler: sched, Program: cfg.Job.Program,
			State: StateSubmitted, Started: time.Now(), Host: hostname()}
		if err := jobstate.Save(cfg.StateDir, st); err != nil {
			return 0, err
		}
		fmt.Fprintf(cfg.Stdout, "%s\n", id)
		return 0, nil
	case sched == hostsconfig.SchedulerSlurm && !inAllocation():
		return allocate(ctx, cfg)
	}
	return runJob(ctx, cfg)
}

func (cfg *RunConfig) defaults() error {
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
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir()
	}
	if cfg.Monarch == "" && cfg.Hosts != nil {
		// The path of monarch on the hosts, when the hosts file gives one.
		switch {
		case cfg.Hosts.Slurm != nil:
			cfg.Monarch = cfg.Hosts.Slurm.Monarch
		case cfg.Hosts.SSH != nil:
			cfg.Monarch = cfg.Hosts.SSH.Monarch
		}
	}
	if cfg.Monarch == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("launch: find the monarch binary: %w", err)
		}
		cfg.Monarch = exe
	}
	return nil
}

// runJob runs the job here: the bus, the host agents, then the client;
// it tears everything down when the client ends or on SIGINT/SIGTERM.
func runJob(ctx context.Context, cfg RunConfig) (int, error) {
	job := cfg.Job
	sched, nhosts := hostsconfig.SchedulerLocal, 1
	var nodes []string
	var busCfg hostsconfig.Bus
	if h := cfg.Hosts; h != nil {
		sched, busCfg = h.Scheduler, h.Bus
		switch sched {
		case hostsconfig.SchedulerLocal:
			if h.Local != nil {
				nhosts = h.Local.Hosts
			}
		case hostsconfig.SchedulerSSH:
			nhosts = len(h.SSH.Hosts)
		case hostsconfig.SchedulerSlurm:
			var err error
			if nodes, err = allocationNodes(); err != nil {
				return 0, fmt.Errorf("launch: %w", err)
			}
			nhosts = len(nodes)
		}
	}
	remote := sched != hostsconfig.SchedulerLocal
	if remote && busCfg.Advertise == "" {
		// Advertise the address on the route to the first host: that is
		// the side the workers call from.
		target := ""
		if sched == hostsconfig.SchedulerSlurm {
			target = nodeAddr(nodes[0])
		} else {
			target = sshHostAddr(cfg.Hosts.SSH, cfg.Hosts.SSH.Hosts[0])
		}
		if a, err := routeTo(target); err == nil && !net.ParseIP(a).IsLoopback() {
			busCfg.Advertise = a
		}
	}
	listenHost, port, adv, err := busAddress(busCfg.Listen, busCfg.Advertise, remote)
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	srv, err := bus.StartServer(bus.ServerOptions{Host: listenHost, Port: port, TLSCert: busCfg.TLSCert, TLSKey: busCfg.TLSKey})
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	defer srv.Shutdown()
	// Everyone who dials the bus (agents, client, procs): how (TLS), and
	// the job's system log levels.
	var dialEnv []string
	for _, kv := range logEnv(job.Log) {
		if strings.HasPrefix(kv, "MONARCH_FILE_LOG=") || strings.HasPrefix(kv, "MONARCH_STDERR_LOG=") {
			dialEnv = append(dialEnv, kv)
		}
	}
	if busCfg.TLSCert != "" {
		dialEnv = append(dialEnv, bus.EnvTLSName+"="+adv)
		if busCfg.TLSCA != "" {
			dialEnv = append(dialEnv, bus.EnvTLSCA+"="+busCfg.TLSCA)
		}
	}
	jobID, err := NewJobID()
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	advURL := "nats://" + net.JoinHostPort(adv, strconv.Itoa(srv.Port()))
	localURL := "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port()))
	if ip := net.ParseIP(listenHost); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		localURL = advURL // listening on one interface only: dial it
	}

	rec := JobState{Job: jobID, Scheduler: sched, Program: job.Program, State: StateStarting,
		Started: time.Now(), SlurmJob: os.Getenv("SLURM_JOB_ID")}
	rec.Self()
	st, err := jobstate.NewWriter(cfg.StateDir, rec)
	if err != nil {
		return 0, fmt.Errorf("launch: %w", err)
	}
	fail := func() { st.Finish(func(r *JobState) { r.State, r.Exit, r.Hosts, r.Procs = StateFailed, 1, 0, 0 }) }
	progressTo := cfg.Progress
	if cfg.Hosts == nil {
		progressTo = io.Discard // a program on this machine, no hosts to report
	}
	prog := newProgress(progressTo, jobID, sched, nhosts)
	watch, err := watchJob(srv, jobID, prog, st)
	if err != nil {
		fail()
		return 0, err
	}
	defer watch.close()

	var ag *agents
	switch sched {
	case hostsconfig.SchedulerLocal:
		if cfg.Hosts != nil {
			ag, err = startLocal(nhosts, cfg.Monarch, jobID, advURL, srv.Token(), dialEnv, job, cfg.Stderr)
		}
	case hostsconfig.SchedulerSlurm:
		ag, err = startSrun(nodes, cfg, jobID, advURL, srv.Token(), dialEnv, cfg.Stderr)
	case hostsconfig.SchedulerSSH:
		ag, err = startSSH(cfg, jobID, advURL, srv.Token(), dialEnv, watch.hostsUp, cfg.Stderr)
	}
	if err != nil {
		fail()
		return 0, fmt.Errorf("launch: %w", err)
	}
	stopAgents := func() {
		if ag != nil {
			ag.stop(cfg.Grace)
		}
	}

	client := exec.Command(job.Program, job.Args...)
	client.Dir = job.Dir
	client.Stdin, client.Stdout, client.Stderr = os.Stdin, cfg.Stdout, cfg.Stderr
	client.Env = append(append(os.Environ(), job.Env...),
		bus.EnvURL+"="+localURL, bus.EnvToken+"="+srv.Token(), bus.EnvJob+"="+jobID,
		"MONARCH_PROCS="+procsSpec(job.Procs))
	client.Env = append(client.Env, dialEnv...)
	client.Env = append(client.Env, logEnv(job.Log)...)
	if cfg.HostsPath != "" {
		client.Env = append(client.Env, "MONARCH_HOSTS="+cfg.HostsPath)
	}
	if ag != nil {
		client.Env = append(client.Env, "MONARCH_HOST_AGENTS="+strconv.Itoa(nhosts))
	}
	client.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startOnLockedThread(client); err != nil {
		stopAgents()
		fail()
		return 0, fmt.Errorf("launch: start %s: %w", job.Program, err)
	}
	st.Update(func(r *JobState) { r.State = StateRunning })

	code, stopped, err := supervise(ctx, cfg, client, ag, watch, nhosts)
	prog.done()
	stopAgents()
	state := StateDone
	switch {
	case stopped && err == nil:
		state = StateStopped // asked to (monarch stop, Ctrl-C, scancel): not a failure
	case code != 0 || err != nil:
		state = StateFailed
	}
	st.Finish(func(r *JobState) { r.State, r.Exit, r.Hosts, r.Procs = state, code, 0, 0 })
	return code, err
}

// supervise waits for the client, passes interrupts on, and fails the job
// at once if an agent cannot start (Slurm refused, ssh could not connect):
// that error is the launcher's to report, with the scheduler's own words.
// stopped says the job was asked to stop (a signal, or ctx ended).
func supervise(ctx context.Context, cfg RunConfig, client *exec.Cmd, ag *agents, watch *jobWatch, nhosts int) (code int, stopped bool, err error) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	go func() { client.Wait(); close(done) }()
	var ended chan agentEnd
	if ag != nil {
		ended = ag.ended
	}
	var failure error
	var kill <-chan time.Time
	interrupt := func(sig os.Signal) {
		stopped = true
		client.Process.Signal(sig)
		if kill == nil {
			kill = time.After(cfg.Grace)
		}
	}
	for {
		select {
		case <-done:
			if failure != nil {
				return 1, false, failure // the launcher's failure, not the client's
			}
			return exitStatus(client.ProcessState), stopped, nil
		case sig := <-sigs:
			interrupt(sig)
		case <-ctx.Done():
			interrupt(syscall.SIGTERM)
			ctx = context.Background()
		case e := <-ended:
			if watch.hostsUp() < nhosts && failure == nil {
				failure = fmt.Errorf("launch: host agents could not start: %s", e)
				interrupt(syscall.SIGTERM)
			} else {
				// Tell the client now rather than after the heartbeat
				// timeout: its supervision takes it from there.
				fmt.Fprintf(cfg.Progress, "monarch: %s\n", e)
				for _, id := range e.agents {
					watch.conn.Publish(bus.JobSubject(watch.job, bus.SubjectAgentGone, id), []byte(e.String()))
				}
			}
		case <-kill:
			client.Process.Kill()
		}
	}
}

func procsSpec(dims []hostsconfig.Dim) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = d.Name + "=" + strconv.Itoa(d.Size)
	}
	return strings.Join(parts, ",")
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// jobWatch follows a job on its bus: which agents heartbeat, how many
// procs came up, for the progress display; and the client's counts of
// what is up now, for the job's record.
type jobWatch struct {
	conn *bus.Conn
	job  string
	stop context.CancelFunc

	mu    sync.Mutex
	hosts map[string]bool
	procs int
}

func watchJob(srv *bus.Server, jobID string, prog *progress, st *jobstate.Writer) (*jobWatch, error) {
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "launcher"})
	if err != nil {
		return nil, err
	}
	hb := bus.JobSubject(jobID, bus.SubjectHeartbeat) + "."
	counts := countsSubject(jobID)
	for _, s := range []string{hb + "*", bus.JobSubject(jobID, bus.SubjectUp), counts} {
		if _, err := conn.Subscribe(s); err != nil {
			conn.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &jobWatch{conn: conn, job: jobID, stop: cancel, hosts: map[string]bool{}}
	go conn.Run(ctx, func(m bus.Message) {
		if m.Subject == counts {
			recordCounts(st, m.Data)
			return
		}
		w.mu.Lock()
		if agent, ok := strings.CutPrefix(m.Subject, hb); ok {
			if w.hosts[agent] || !isAgentID(agent) {
				w.mu.Unlock()
				return
			}
			w.hosts[agent] = true
		} else {
			w.procs++
		}
		hosts, procs := len(w.hosts), w.procs
		w.mu.Unlock()
		prog.update(hosts, procs)
	})
	return w, nil
}

func (w *jobWatch) hostsUp() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.hosts)
}

func (w *jobWatch) close() {
	w.stop()
	w.conn.Close()
}

// isAgentID tells the launcher's agents (h0, h1, ...) from procs that
// heartbeat because they started procs of their own.
func isAgentID(s string) bool {
	if len(s) < 2 || s[0] != 'h' {
		return false
	}
	_, err := strconv.Atoi(s[1:])
	return err == nil
}

// logEnv passes the job file's [log] options to the client (and through
// it, the procs); the environment, when it sets a level, wins.
func logEnv(l hostsconfig.Log) []string {
	if l == (hostsconfig.Log{}) {
		l = hostsconfig.Log{StreamToClient: true} // a job made up on the command line
	}
	env := []string{"MONARCH_LOG_STREAM=" + strconv.FormatBool(l.StreamToClient)}
	if l.AggregateWindow > 0 {
		env = append(env, "MONARCH_LOG_WINDOW="+l.AggregateWindow.String())
	}
	for k, v := range map[string]string{"MONARCH_FILE_LOG": l.FileLevel, "MONARCH_STDERR_LOG": l.StderrLevel} {
		if v != "" && os.Getenv(k) == "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}
