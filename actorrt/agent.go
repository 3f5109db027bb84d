package actorrt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// A host agent of a multi-host job is `monarch agent`, started on each
// host by the launcher (an srun step, an ssh session, or a local process).
// It is a proc of the job without actors of its own: it starts the job's
// program in worker mode for every proc asked of its host, watches and
// stops them, and exits when the job is gone: its bus connection lost,
// SIGTERM (srun's teardown), or EOF on its stdin (the ssh session closed).
// Once connected it reports to the client, which collects the agents into
// the HostMesh that HostsFromConfig returns.

// envAgents tells the client how many agents the launcher started.
const envAgents = "MONARCH_HOST_AGENTS"

// agentsPort is the client port every agent reports to: a fixed number,
// since agents are started before the client runs.
const agentsPort uint64 = 1 << 62

// AgentConfig configures RunAgent.
type AgentConfig struct {
	Job    string // the job id
	Index  int    // this host's rank in the job's host mesh
	BusURL string // where the job's bus is
	Token  string // the job's secret
	// Program, Args, Dir and Env: what each proc runs (the job's program).
	Program string
	Args    []string
	Dir     string
	Env     []string
	// Stdin, if set, is watched: the agent exits at EOF.
	Stdin io.Reader
}

// AgentID is the proc id of the agent of host index i.
func AgentID(i int) string { return "h" + strconv.Itoa(i) }

// RunAgent serves as the host agent of a job until the job is gone, and
// returns the exit status.
func RunAgent(ctx context.Context, cfg AgentConfig) int {
	if err := runAgent(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "monarch agent %s: %v\n", AgentID(cfg.Index), err)
		return 1
	}
	return 0
}

func runAgent(ctx context.Context, cfg AgentConfig) error {
	if cfg.Job == "" || cfg.BusURL == "" || cfg.Token == "" || cfg.Program == "" || cfg.Index < 0 {
		return errors.New("incomplete agent configuration (job, bus URL, token, program, index)")
	}
	hostname, _ := os.Hostname()
	rt := &runtimeT{
		job: cfg.Job, procID: AgentID(cfg.Index), busURL: cfg.BusURL, token: cfg.Token,
		hostname: hostname, hostLabel: hostLabel(hostname), opts: defaultOptions(),
	}
	if err := rt.openSystemLog("agent-" + rt.procID); err != nil {
		return err
	}
	pruneSystemLogs()
	conn, err := bus.Connect(cfg.BusURL, tlsOptions(bus.ConnOptions{Name: "agent " + rt.procID, Token: cfg.Token, OnError: rt.busFault}))
	if err != nil {
		return err
	}
	rt.conn = conn
	rt.agentMode = true
	if err := rt.start(); err != nil {
		conn.Close()
		return err
	}
	defer rt.shutdown()
	rt.host.program, rt.host.args, rt.host.dir, rt.host.env = cfg.Program, cfg.Args, cfg.Dir, cfg.Env
	// Report now, and again whenever the client asks: an agent may start
	// before the client is listening, or after it asked.
	if _, err := rt.conn.Subscribe(rt.agentsSubject()); err != nil {
		return err
	}
	rt.agentIndex = cfg.Index
	if err := rt.reportAgent(); err != nil {
		return err
	}

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(term)
	eof := make(chan struct{})
	if cfg.Stdin != nil {
		go func() {
			io.Copy(io.Discard, bufio.NewReader(cfg.Stdin))
			close(eof)
		}()
	}
	select {
	case <-rt.dispatchEnd:
		return errors.New("bus connection lost")
	case <-term:
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}

// agentWait collects the agents' reports at the client.
type agentWait struct {
	fut *Future[ValueMesh[wire.ProcReady]]
	n   int
}

// openAgentsPort opens the agents' port when the launcher started agents.
func (rt *runtimeT) openAgentsPort() error {
	s := os.Getenv(envAgents)
	if s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("actorrt: %s=%q: want a number of hosts", envAgents, s)
	}
	ext, _ := NewExtent(Dims{{"hosts", n}})
	rt.agents.n = n
	rt.agents.fut = newFuture[ValueMesh[wire.ProcReady]](label{mesh: "host agents"})
	waits := make([]string, n)
	for i := range waits {
		waits[i] = AgentID(i)
	}
	rt.ports.openAt(agentsPort, newCallPort[wire.ProcReady](rt.agents.fut, ext), waits)
	return nil
}

// launchedHosts returns the HostMesh of the agents a launcher started,
// once all have reported (bounded by the spawn timeout).
func (rt *runtimeT) launchedHosts(ctx context.Context) (*HostMesh, error) {
	ctx, cancel := context.WithTimeout(ctx, rt.opts.spawnTimeout)
	defer cancel()
	ready, err := rt.agents.fut.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("actorrt: waiting for %d host agents: %w", rt.agents.n, err)
	}
	hosts := make([]hostInfo, rt.agents.n)
	infos := make([]procInfo, rt.agents.n)
	for i, r := range ready.Values() {
		hosts[i] = hostInfo{Agent: AgentID(i), Name: r.Host}
		infos[i] = procInfo{ID: AgentID(i), Host: r.Host, PID: r.PID, Agent: AgentID(i)}
	}
	rt.noteAgents(infos)
	return &HostMesh{reg: wholeRegion(ready.Extent()), hosts: hosts}, nil
}

func (rt *runtimeT) agentsSubject() string { return bus.JobSubject(rt.job, "agents") }

// reportAgent tells the client this agent serves.
func (rt *runtimeT) reportAgent() error {
	ready := wire.ProcReady{PID: os.Getpid(), Host: rt.hostname}
	to := portRef{proc: clientProcID, id: agentsPort, rank: rt.agentIndex}
	return rt.sendToPort(to, 0, func(e *msgpack.Encoder) error { return e.Encode(&ready) })
}

// askAgents asks every agent of the job to report (client).
func (rt *runtimeT) askAgents() error {
	h := wire.Header{Kind: wire.KindControl, Method: wire.OpAgentsHello, ReplyTo: rt.procID, Rank: -1}
	w, err := rt.newFrame(&h)
	if err != nil {
		return err
	}
	defer w.Free()
	w.Enc.EncodeNil()
	return rt.publish(rt.agentsSubject(), w.Bytes())
}
