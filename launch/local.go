package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// The local scheduler: this machine. With a hosts file (scheduler =
// "local", or monarch local --hosts N) its hosts are simulated: one host
// agent process each, all here, named h0, h1, ... in logs and status.
// Without one the program runs alone, with no host agents: its
// ThisHost(ctx) is its own.

func init() {
	register(kind{name: hostsconfig.SchedulerLocal, title: "local", open: func(h *hostsconfig.Hosts) scheduler {
		if h == nil {
			return localScheduler{}
		}
		n := 1
		if h.Local != nil {
			n = h.Local.Hosts
		}
		return localScheduler{hosts: n}
	}})
}

// localScheduler runs hosts simulated hosts; none: no hosts file.
type localScheduler struct{ hosts int }

// prepare names the simulated hosts as their agents: h0, h1, ...
func (l localScheduler) prepare(ctx context.Context) (*placement, error) {
	return &placement{hosts: agentIDs(l.hosts)}, nil
}

// start starts an agent process for every simulated host.
func (l localScheduler) start(ctx context.Context, p *placement, spec *agentSpec) (*agents, error) {
	a := newAgents(len(p.hosts))
	for i := range p.hosts {
		if err := a.start("agent "+jobenv.AgentID(i), []string{jobenv.AgentID(i)}, localAgent(spec, i), spec.stderr); err != nil {
			a.stop(time.Second)
			return nil, err
		}
	}
	return a, nil
}

// localAgent is the command of simulated host i's agent. The secret is in
// its environment. The simulated hosts all run on this machine: their
// lines are told apart by their host names (jobenv.Env.HostName), the
// ones status and the system logs use.
func localAgent(spec *agentSpec, i int) *exec.Cmd {
	args := spec.args
	args.Index = i
	argv := args.Argv(spec.monarch)
	cmd := exec.Command(argv[0], argv[1:]...)
	env := spec.env
	env.HostName = jobenv.AgentID(i)
	cmd.Env = childEnv(env)
	cmd.Stdout = os.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// LocalSPMDJob is an SPMD job made up from a command line, to run on this
// machine: argv on every proc, procs of each host as dims say, in the
// current directory, output streamed to the client.
func LocalSPMDJob(argv []string, dims []hostsconfig.Dim) (*hostsconfig.Job, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("launch: local: no command to run")
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("launch: local: %w", err)
	}
	return &hostsconfig.Job{SPMD: &hostsconfig.SPMD{Command: argv, GPUsDim: "gpus"}, Procs: dims, Dir: dir,
		Log: hostsconfig.Log{StreamToClient: true}}, nil
}

// LocalJob is a job made up from a command line, to run on this machine:
// the program in the current directory, output streamed to the client.
func LocalJob(program string, args []string) (*hostsconfig.Job, error) {
	if program == "" {
		return nil, errors.New("launch: local: no program to run")
	}
	path, err := exec.LookPath(program)
	if err != nil {
		return nil, fmt.Errorf("launch: local: %w", err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("launch: local: %w", err)
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("launch: local: %w", err)
	}
	return &hostsconfig.Job{Program: path, Args: args, Dir: dir, Log: hostsconfig.Log{StreamToClient: true}}, nil
}
