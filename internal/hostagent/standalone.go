package hostagent

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"
)

// HeartbeatInterval is how often an agent that has procs to answer for
// heartbeats (a standalone agent, from the start), unless its
// Config.Heartbeat says otherwise.
const HeartbeatInterval = time.Second

// DefaultStopTimeout is how long a standalone agent's procs have to stop
// before they are killed.
const DefaultStopTimeout = 5 * time.Second

// AnnounceAgain are when, after a proc's end, its notice goes out again.
var AnnounceAgain = [...]time.Duration{time.Second, 4 * time.Second}

// ConnectFor is how long a standalone agent tries to reach the job's bus
// (bus.ConnOptions.ConnectFor).
const ConnectFor = 30 * time.Second

// Heartbeats publishes the agent's heartbeat every Config.Heartbeat, once
// it has started a proc (always, if always is set), until ctx ends.
func (a *Agent) Heartbeats(ctx context.Context, always bool) {
	t := time.NewTicker(a.heartbeat())
	defer t.Stop()
	h := wire.Header{Kind: wire.KindControl, Method: wire.OpHeartbeat, ReplyTo: a.cfg.ID, Rank: -1}
	subject := a.subjects.Heartbeat(a.cfg.ID)
	for {
		if always || a.started.Load() {
			a.publishFrame(subject, &h, func(e *msgpack.Encoder) error { return e.EncodeNil() })
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

func (a *Agent) heartbeat() time.Duration {
	if a.cfg.Heartbeat > 0 {
		return a.cfg.Heartbeat
	}
	return HeartbeatInterval
}

// Run serves as the standalone host agent of a job (`monarch agent`)
// until the job is gone: its bus connection lost, or its host's link to
// the hub down for LinkGrace (an error), SIGTERM, SIGINT or SIGHUP, EOF
// on stdin when stdin is given (an ssh session), or ctx's end. It then
// stops its procs and returns.
//
// It starts its host's bus (StartHostBus) when env.Bus.Leaf is set, and
// fails if that cannot link to the hub; its procs and itself are then on
// it. Without, it and its procs dial the hub, env.Bus.URL.
func Run(ctx context.Context, args jobenv.AgentArgs, env jobenv.Env, stdin io.Reader) error {
	if args.Job == "" || env.Bus.URL == "" || env.Bus.Token == "" && env.LinkMunge == "" || args.Program == "" || args.Index < 0 {
		return errors.New("incomplete agent configuration (job, bus URL, token or MUNGE socket, program, index)")
	}
	hostname, _ := os.Hostname()
	host := hostname
	if env.HostName != "" {
		host = env.HostName
	}
	health := env.HealthOrDefault()
	cfg := Config{
		ID: jobenv.AgentID(args.Index), Job: args.Job, Bus: env.Bus, Host: host, Addr: routeAddr(env.Bus.URL),
		Program: args.Program, ProgramSum: args.ProgramSum, Args: args.Args, Dir: args.Dir, StopTimeout: DefaultStopTimeout,
		Heartbeat: health.Heartbeat,
	}
	log, logFile, err := logagg.SystemLogger(cfg.Job, "agent-"+cfg.ID)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cfg.Log = log
	jobstate.PruneSystemLogs(time.Now())

	s := &standalone{index: args.Index, log: log}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// The link that tells the job this agent's process lives and its host
	// answers, whatever its load (see internal/hostlink), is also where
	// the agent is admitted: the token, if it came without (Slurm), and
	// its host's certificate, which its leaf needs. So it comes first.
	var hostCert *tls.Certificate
	if env.LinkWatcher != "" {
		adm, err := admit(runCtx, env, cfg.Job, cfg.ID, health.LinkTimeout)
		if err != nil {
			return err
		}
		env.Bus.Token, cfg.Bus.Token, hostCert = adm.token, adm.token, adm.cert
	}
	// The procs' variables came sealed under the token, which this agent
	// now holds (see jobenv.SealEnv).
	if cfg.Env, err = jobenv.OpenEnv(env.Bus.Token, env.SealedEnv); err != nil {
		return err
	}
	// The host's procs and this agent are on the host's bus, a leaf of
	// the job's hub; without a leaf URL (an agent started by hand), on the
	// hub itself.
	var conn *bus.Conn
	var hubLost <-chan error
	if env.Bus.Leaf != "" {
		hb, err := StartHostBus(ctx, HostBusConfig{Job: cfg.Job, Index: args.Index, Bus: env.Bus, Log: log, Key: cfg.ID, Cert: hostCert})
		if err != nil {
			return err
		}
		defer hb.Close()
		cfg.Bus, hubLost = hb.Procs(), hb.Lost()
		conn, err = bus.ConnectInProcess(hb.Server(), bus.ConnOptions{Name: "agent " + cfg.ID, HubServers: env.Bus.Hubs, OnError: s.busFault, ReconnectFor: health.HostTimeout})
		if err != nil {
			return err
		}
	} else {
		// A link that drops (its pings late behind a busy hub, say)
		// dials again, for the host timeout: the job's fault machinery,
		// not a late pong, decides whether this host is lost.
		conn, err = bus.Connect(env.Bus.URL, bus.ConnOptions{Name: "agent " + cfg.ID, Token: env.Bus.Token,
			TLS: ClientTLS(env.Bus), HubServers: env.Bus.Hubs, OnError: s.busFault, ConnectFor: ConnectFor,
			ReconnectFor: health.HostTimeout})
		if err != nil {
			return err
		}
	}
	defer conn.Close()
	s.conn = conn
	s.subjects = jobenv.SubjectsOf(cfg.Job)
	// The job hears of every proc of this host that ends: again after a
	// while too, since a notice lost to a link that was down is not sent
	// again by anything else (the receivers drop repeats).
	cfg.OnEnd = func(n wire.GoneNotice) {
		s.announce(&n)
		for _, d := range AnnounceAgain {
			time.AfterFunc(d, func() { s.announce(&n) })
		}
	}
	s.agent = New(cfg, conn)
	defer s.agent.Close()
	if cfg.ProgramSum != "" {
		// A program sent for an SDK job: hashed while the client starts,
		// not at its first spawn.
		go s.agent.program.get()
	}
	for _, subj := range []string{s.subjects.Proc(cfg.ID), s.subjects.Agents()} {
		if _, err := conn.Subscribe(subj); err != nil {
			return err
		}
	}
	lost := make(chan error, 1)
	go func() { lost <- conn.Run(runCtx, s.dispatch) }()
	go s.agent.Heartbeats(runCtx, true)
	go s.agent.WatchLiveness(runCtx, health.HostTimeout)
	// Report now, and again whenever the client asks: an agent may start
	// before the client listens, or after it asked.
	if err := s.report(); err != nil {
		return err
	}

	term := make(chan os.Signal, 1)
	// Slurm's time-limit signal to a step (salloc --signal) is the
	// client's business, not a reason to end. It is caught and dropped,
	// not ignored: an ignored signal stays ignored in the procs the agent
	// starts, where a shell could then not trap it (an SPMD job's notice,
	// see SignalProcs); a caught one is reset to its default there.
	usr1 := make(chan os.Signal, 1) // full, further ones are dropped
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(term)
	eof := make(chan struct{})
	if stdin != nil {
		go func() {
			io.Copy(io.Discard, bufio.NewReader(stdin))
			close(eof)
		}()
	}
	select {
	case err := <-lost:
		if runCtx.Err() == nil {
			return fmt.Errorf("bus connection lost: %v", err)
		}
	case err := <-hubLost:
		return err
	case <-term:
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}

// standalone is what a standalone agent adds to an Agent: its own bus
// connection and dispatcher.
type standalone struct {
	agent    *Agent
	conn     *bus.Conn
	subjects jobenv.Subjects
	index    int
	log      zerolog.Logger
	drops    wire.Drops
}

// dispatch acts on one message: the agent's own control ops and the
// client's call to report. Anything else addressed here is dropped and
// counted.
func (s *standalone) dispatch(m bus.Message) {
	f, err := wire.Parse(m.Data)
	if err != nil {
		s.drop(wire.DropFrame, m.Subject, err)
		return
	}
	if f.Kind != wire.KindControl {
		s.drop(wire.DropKindOf, m.Subject, fmt.Errorf("a message of kind %d for a host agent", f.Kind))
		return
	}
	if f.Method == wire.OpPortGone {
		// The client had what this agent sent it (a report answers every
		// ask, and the client asks until all have reported): nothing to
		// do.
		return
	}
	body, kind, err := wire.ReadAgentControl(&f)
	if err != nil {
		s.drop(kind, m.Subject, err)
		if f.Port != 0 && wire.ValidID(f.ReplyTo) {
			s.agent.replyError(f.ReplyTo, f.Port, f.Rank, fmt.Errorf("%w: %v", wire.ErrDecode, err))
		}
		return
	}
	switch b := body.(type) {
	case *wire.SpawnProcsReq:
		go s.agent.SpawnProcs(*b)
	case *wire.RespawnProcReq:
		go s.agent.RespawnProc(*b)
	case *wire.EndedReq:
		s.agent.Ended(*b, f.ReplyTo, f.Port)
	case *wire.ExecReq:
		s.agent.Exec(*b, f.ReplyTo, f.Port)
	case *wire.ExecStopReq:
		s.agent.ExecStop(*b, f.ReplyTo)
	case *wire.StopProcsReq:
		switch f.Method {
		case wire.OpSyncLogs:
			s.agent.SyncLogs(*b, f.ReplyTo, f.Port)
		case wire.OpSignalProcs:
			s.agent.SignalProcs(*b, f.ReplyTo, f.Port)
		default:
			s.agent.StopProcs(*b, f.ReplyTo, f.Port)
		}
	case nil:
		switch f.Method {
		case wire.OpAgentsHello:
			s.report()
		case wire.OpAlive:
			s.agent.Alive(f.ReplyTo)
		case wire.OpSlotTaken:
			s.agent.SlotTaken(f.ReplyTo)
		case wire.OpFreePort:
			s.agent.FreePort(f.ReplyTo, f.Port)
		}
	}
}

// report tells the client this agent serves: its pid and host, on the
// client's agents port, at this host's rank. The host is the one its
// procs' lines are tagged with: a simulated host's name (h1), not the
// machine's it shares with the others.
func (s *standalone) report() error {
	ready := wire.ProcReady{PID: os.Getpid(), Host: s.agent.cfg.Host}
	h := wire.Header{Kind: wire.KindPort, Port: wire.AgentsPort, Rank: s.index, ReplyTo: s.agent.cfg.ID}
	return s.agent.publishFrame(s.subjects.Proc(jobenv.ClientID), &h, func(e *msgpack.Encoder) error { return e.Encode(&ready) })
}

// announce tells the job that a proc of this host ended.
func (s *standalone) announce(n *wire.GoneNotice) {
	h := wire.Header{Kind: wire.KindControl, Method: wire.OpGone, ReplyTo: s.agent.cfg.ID, Rank: -1}
	if err := s.agent.publishFrame(s.subjects.Deaths(s.agent.cfg.ID), &h, func(e *msgpack.Encoder) error { return e.Encode(n) }); err != nil {
		s.log.Error().Err(err).Str("proc", n.Proc).Msg("cannot announce a proc's end")
	}
}

// busFault logs what the bus reports. A lost link ends Run (the bus's
// Run returns); a malformed message the bus dropped is logged once per
// kind by the bus itself.
func (s *standalone) busFault(err error) {
	s.log.Warn().Err(err).Msg("bus fault")
}

// drop counts a malformed message; the first of its kind is logged.
func (s *standalone) drop(k wire.DropKind, subject string, err error) {
	if s.drops.Add(k) == 1 {
		s.log.Warn().Err(err).Str("drop", k.String()).Str("subject", subject).
			Msg("dropped a malformed message; later ones of this kind are counted, not logged")
	}
}
