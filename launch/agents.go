package launch

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/rs/zerolog"
)

// agents is the set of host agents a launcher started: local processes,
// one srun step, or ssh sessions. Each ends by itself when the job's bus
// goes away; stop ends them sooner. A nil *agents is an empty set.
type agents struct {
	ended chan agentEnd // one per process, and one per task of the srun step that ends before it

	mu     sync.Mutex
	procs  []*child.Process
	stdins []io.WriteCloser // ssh: closing one ends that agent
	// The launcher's system log, where srun's and ssh's own lines go
	// (see stepLog): opened at the first stepLog, if it can be.
	sysTried bool
	sys      *zerolog.Logger
	sysPath  string
	closer   io.Closer
}

// newAgents returns an empty set for n processes.
func newAgents(n int) *agents { return &agents{ended: make(chan agentEnd, n)} }

// agentEnd reports a launcher process that ended: which (a local host's
// agent, "ssh HOST", "srun step"), how, and why in its own words. For an
// srun step or an ssh session that is the first failing host and its
// error (stepCause), with the lines it was read from (said); for a local
// agent, the last lines it wrote to stderr.
type agentEnd struct {
	what   string
	agents []string // the agents that ended: one, or those of the srun step not reported before
	err    error
	status string   // how it ended when not as the process (an srun task's end); "": child.Describe(err)
	tail   string   // a local agent's last lines, joined
	cause  string   // an srun step's or ssh session's cause (stepCause.String)
	lines  []string // what srun or ssh said, the failing host's lines first, bounded
	more   int      // lines said but not in lines
	log    string   // the system log that has all of srun's or ssh's lines
}

// String is the end in one line: what ended, how, and why.
func (e agentEnd) String() string {
	status := e.status
	if status == "" {
		status = child.Describe(e.err)
	}
	switch {
	case e.cause != "":
		return fmt.Sprintf("%s %s; %s", e.what, status, e.cause)
	case e.tail != "":
		return fmt.Sprintf("%s %s: %s", e.what, status, e.tail)
	}
	return e.what + " " + status
}

// said is what srun or ssh said before the end, to print below String:
// "" when nothing, else a newline and indented lines.
func (e agentEnd) said() string {
	if len(e.lines) == 0 {
		return ""
	}
	var b strings.Builder
	tool, _, _ := strings.Cut(e.what, " ")
	fmt.Fprintf(&b, "\n  %s said:", tool)
	for _, l := range e.lines {
		b.WriteString("\n    " + l)
	}
	switch {
	case e.more > 0 && e.log != "":
		fmt.Fprintf(&b, "\n    (%d more lines: all are in %s)", e.more, e.log)
	case e.more > 0:
		fmt.Fprintf(&b, "\n    (%d more lines)", e.more)
	case e.log != "":
		fmt.Fprintf(&b, "\n    (also in %s)", e.log)
	}
	return b.String()
}

// start starts cmd, the process holding the agents ids, and reports its
// end on a.ended, with the tail of its stderr (which also goes to w).
func (a *agents) start(what string, ids []string, cmd *exec.Cmd, w io.Writer) error {
	tail := &tailWriter{max: 4}
	cmd.Stderr = io.MultiWriter(w, tail)
	return a.run(what, ids, cmd, func(e *agentEnd) bool { e.tail = tail.String(); return true })
}

// startStep starts cmd, an srun step or an ssh session holding the agents
// ids, its stderr taken by log, and reports its end on a.ended with the
// cause read (by read: readSrun, readSSH) from what it said.
func (a *agents) startStep(what string, ids []string, cmd *exec.Cmd, log *stepLog, read func(string) (stepCause, bool)) error {
	cmd.Stderr = log
	return a.run(what, ids, cmd, func(e *agentEnd) bool {
		log.flush()
		e.readLog(log, read, nil)
		return true
	})
}

// readLog sets e's cause and lines from what log kept: the lines keep
// selects (nil: all), read for a cause by read. A cause whose host e's
// what names already (ssh h2, srun task on h2) is given without it.
func (e *agentEnd) readLog(log *stepLog, read func(string) (stepCause, bool), keep func(string) bool) {
	kept, dropped := log.said()
	lines := make([]string, 0, len(kept))
	for _, l := range kept {
		if keep == nil || keep(l.text) {
			lines = append(lines, l.text)
		}
	}
	c, ok := firstCause(lines, read)
	switch {
	case ok && strings.HasSuffix(e.what, " "+c.host):
		e.cause = c.msg
	case ok:
		e.cause = c.String()
	}
	lines = hostFirst(lines, c.host)
	if len(lines) > maxShownLines {
		dropped += len(lines) - maxShownLines
		lines = lines[:maxShownLines]
	}
	e.lines, e.more, e.log = lines, dropped, log.path
}

// maxShownLines bounds what an end's message shows of what srun or ssh
// said; the system log has it all.
const maxShownLines = 12

// run starts cmd and reports its end on a.ended, as done completes it;
// not when done returns false (the agents it held were all reported).
func (a *agents) run(what string, ids []string, cmd *exec.Cmd, done func(*agentEnd) bool) error {
	p, err := child.Start(cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	a.mu.Lock()
	a.procs = append(a.procs, p)
	a.mu.Unlock()
	go func() {
		<-p.Done()
		e := agentEnd{what: what, agents: ids, err: p.Err()}
		if done(&e) {
			a.ended <- e
		}
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
// child.KillWait after the SIGKILL. Then it closes the system log.
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
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closer != nil {
		a.closer.Close()
		a.closer = nil
	}
}

// agentIDs are the ids of the agents of n hosts.
func agentIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = jobenv.AgentID(i)
	}
	return ids
}

// hubHosts names the hosts whose agents run the hub's other servers
// (the first hubs-1 of hosts), for the agents' messages
// (jobenv.Bus.HubHosts); nil for a hub of one server.
func hubHosts(hosts []string, hubs int) []string {
	if hubs < 2 {
		return nil
	}
	return hosts[:min(hubs-1, len(hosts))]
}

// childEnv is the environment of a launcher's child: this process's,
// without the variables of the job contract (those of a job this launcher
// may itself run in), then own (the job file's env), then env's.
func childEnv(env jobenv.Env, own ...string) []string {
	return append(append(jobenv.Clean(os.Environ()), own...), env.Environ()...)
}
