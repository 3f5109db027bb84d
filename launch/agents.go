package launch

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// agents is the set of host agents a launcher started: local processes,
// one srun step, or ssh sessions. Each ends by itself when the job's bus
// goes away; stop ends them sooner. A nil *agents is an empty set.
type agents struct {
	ended chan agentEnd // one per process (the srun step counts as one)

	mu     sync.Mutex
	procs  []*child.Process
	stdins []io.WriteCloser // ssh: closing one ends that agent
}

// newAgents returns an empty set for n processes.
func newAgents(n int) *agents { return &agents{ended: make(chan agentEnd, n)} }

// agentEnd reports a launcher process that ended: which host (or "srun"),
// how, and the last lines it wrote to stderr.
type agentEnd struct {
	what   string
	agents []string // the agents this process held: one, or a whole srun step
	err    error
	tail   string
}

func (e agentEnd) String() string {
	status := child.Describe(e.err)
	if e.tail != "" {
		return fmt.Sprintf("%s %s: %s", e.what, status, e.tail)
	}
	return e.what + " " + status
}

// start starts cmd, the process holding the agents ids, and reports its
// end on a.ended, with the tail of its stderr (which also goes to w).
func (a *agents) start(what string, ids []string, cmd *exec.Cmd, w io.Writer) error {
	tail := &tailWriter{max: 4}
	cmd.Stderr = io.MultiWriter(w, tail)
	p, err := child.Start(cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	a.mu.Lock()
	a.procs = append(a.procs, p)
	a.mu.Unlock()
	go func() {
		<-p.Done()
		a.ended <- agentEnd{what: what, agents: ids, err: p.Err(), tail: tail.String()}
	}()
	return nil
}

// endings reports each agent process that ends; nil for no agents.
func (a *agents) endings() <-chan agentEnd {
	if a == nil {
		return nil
	}
	return a.ended
}

// stop ends every agent: stdin closed (ssh), SIGTERM, then SIGKILL after
// grace (see child.StopAll); it returns when all are reaped, or
// child.KillWait after the SIGKILL.
func (a *agents) stop(grace time.Duration) {
	if a == nil {
		return
	}
	a.mu.Lock()
	procs, stdins := a.procs, a.stdins
	a.mu.Unlock()
	for _, w := range stdins {
		w.Close()
	}
	child.StopAll(procs, grace)
}

// agentIDs are the ids of the agents of n hosts.
func agentIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = jobenv.AgentID(i)
	}
	return ids
}

// childEnv is the environment of a launcher's child: this process's,
// without the variables of the job contract (those of a job this launcher
// may itself run in), then own (the job file's env), then env's.
func childEnv(env jobenv.Env, own ...string) []string {
	return append(append(jobenv.Clean(os.Environ()), own...), env.Environ()...)
}
