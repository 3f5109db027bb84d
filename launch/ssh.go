package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// The ssh scheduler: one session per host, the agent started with its
// secret on stdin and the session held open: when the launcher closes
// stdin (or dies, or the link breaks) the agent sees EOF and exits, taking
// its procs along. Without a terminal, killing the ssh client alone would
// leave the remote process running.

func init() {
	register(kind{name: hostsconfig.SchedulerSSH, title: "ssh", open: func(h *hostsconfig.Hosts) scheduler {
		return sshScheduler{h.SSH}
	}})
}

// sshSetupWait bounds how long the launcher waits for a session being set
// up to report before it starts the next one anyway (one may never
// report).
const sshSetupWait = 10 * time.Second

type sshScheduler struct{ cfg *hostsconfig.SSH }

// prepare: the hosts of the file, reached over the network.
func (s sshScheduler) prepare(ctx context.Context) (*placement, error) {
	return &placement{
		hosts: s.cfg.Hosts, remote: true, monarch: s.cfg.Monarch,
		route: func(ctx context.Context) string { return sshHostAddr(ctx, s.cfg, s.cfg.Hosts[0]) },
	}, nil
}

// start starts an agent on every host, at most Parallel sessions being
// set up at a time: while that many started agents have not reported, it
// waits (at most sshSetupWait) for one to.
func (s sshScheduler) start(ctx context.Context, p *placement, spec *agentSpec) (*agents, error) {
	spec.env.Bus.HubHosts = hubHosts(p.hosts, spec.env.Bus.Hubs)
	if err := s.ship(ctx, p.hosts, spec.ship); err != nil {
		return nil, err
	}
	a := newAgents(len(p.hosts))
	parallel := s.cfg.Parallel
	if parallel < 1 {
		parallel = hostsconfig.DefaultSSHParallel
	}
	for i, host := range p.hosts {
		if i >= parallel {
			limit := time.NewTimer(sshSetupWait)
			spec.awaitAgents(ctx, i-parallel+1, limit.C)
			limit.Stop()
		}
		cmd := s.session(spec, host, i)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			a.stop(time.Second)
			return nil, err
		}
		log := a.stepLog(spec.args.Job, "ssh "+host, sshOwn, spec.stderr)
		monarch, program := spec.monarch, spec.args.Program
		spec.ship.use(i, &monarch, &program)
		why := causeContext{hosts: p.hosts, monarch: monarch, key: "[ssh] monarch", keySet: s.cfg.Monarch != "", session: host}
		if err := a.startStep("ssh "+host, []string{jobenv.AgentID(i)}, cmd, log, why.readSSH); err != nil {
			a.stop(time.Second)
			return nil, err
		}
		a.mu.Lock()
		a.stdins = append(a.stdins, stdin)
		a.mu.Unlock()
		if err := jobenv.WriteSecrets(stdin, spec.env.Bus.Token, spec.env.SealedEnv); err != nil {
			a.stop(time.Second)
			return nil, fmt.Errorf("ssh %s: send the job secret: %w", host, err)
		}
	}
	return a, nil
}

// sshOwnPrefixes start the lines of ssh itself, and of the remote shell
// and env that run the agent (a missing binary), as opposed to the
// agent's own: those go to the system log, not the terminal (see
// stepLog), and into the message if the session fails.
var sshOwnPrefixes = []string{"ssh: ", "Warning: Permanently added", "Connection to ", "Connection closed by ",
	"Connection reset by ", "kex_exchange_identification: ", "Permission denied", "Host key verification failed",
	"Load key ", "client_loop: ", "Timeout, server ", "packet_write_wait: ", "Bad owner or permissions",
	"Received disconnect from ", "Disconnected from ", "Killed by signal ", "env: ", "sh: ", "bash: ", "dash: ", "zsh: "}

// sshOwn tells ssh's own lines (sshOwnPrefixes) from the agent's.
func sshOwn(line string) bool {
	for _, p := range sshOwnPrefixes {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// session is the ssh command that runs host i's agent on host. Its remote
// command, which every user of the host can read, sets the agent's
// environment but for the secret and the procs' sealed variables, which
// the agent reads from stdin (jobenv.ReadSecrets).
func (s sshScheduler) session(spec *agentSpec, host string, i int) *exec.Cmd {
	env := spec.env
	env.Bus.Token, env.SealedEnv = "", ""
	args, monarch := spec.args, spec.monarch
	args.Index, args.TokenStdin = i, true
	spec.ship.use(i, &monarch, &args.Program) // the copies sent, if any
	remote := append(append([]string{"env"}, env.Environ()...), args.Argv(monarch)...)
	quoted := make([]string, len(remote))
	for j, w := range remote {
		quoted[j] = shellQuote(w)
	}
	cmd := exec.Command("ssh", append(sshArgs(s.cfg, host), strings.Join(quoted, " "))...)
	cmd.Stdout = os.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func sshArgs(s *hostsconfig.SSH, host string) []string {
	args := []string{"-T", "-o", "BatchMode=yes"}
	timeout := s.ConnectTimeout
	if timeout <= 0 {
		timeout = hostsconfig.DefaultSSHConnectTimeout
	}
	args = append(args, "-o", "ConnectTimeout="+strconv.Itoa(int((timeout+time.Second-1)/time.Second)))
	if s.ConfigFile != "" {
		args = append(args, "-F", s.ConfigFile)
	}
	if s.IdentityFile != "" {
		args = append(args, "-i", s.IdentityFile)
	}
	if s.User != "" {
		args = append(args, "-l", s.User)
	}
	if s.Port != 0 {
		args = append(args, "-p", strconv.Itoa(s.Port))
	}
	for _, o := range s.Options {
		args = append(args, "-o", o)
	}
	return append(args, host)
}

// sshHostAddr asks ssh what address it would connect to for host (its
// config may rename it).
func sshHostAddr(ctx context.Context, s *hostsconfig.SSH, host string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := []string{"-G"}
	if s.ConfigFile != "" {
		args = append(args, "-F", s.ConfigFile)
	}
	for _, o := range s.Options {
		args = append(args, "-o", o)
	}
	out, err := exec.CommandContext(ctx, "ssh", append(args, host)...).Output()
	if err != nil {
		return host
	}
	for _, line := range strings.Split(string(out), "\n") {
		if a, ok := strings.CutPrefix(line, "hostname "); ok {
			return strings.TrimSpace(a)
		}
	}
	return host
}
