package launch

import (
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
)

// The agents' srun step runs with --kill-on-bad-exit=0 and --wait=0: one
// agent's end (its host lost, its agent killed) leaves the others and
// their procs running, as an ssh session's end does, for the client's
// supervision to take the lost host's slots elsewhere. srun says when a
// task ends badly ("srun: error: h2: task 1: Killed"): each such line
// reports that host's agent ended, alone, taskSettle later. (srun says
// nothing of a task that exits 0: an agent that does so while the job
// runs is found silent by the client, as a host lost.) The step's own
// end (all tasks ended, the launcher stopped it, Slurm ended it) reports
// the agents not reported yet, with srun's cause as before.

// taskSettle is how long a task's end waits before it is reported, for
// its host's last lines: slurmstepd may pass on what the task wrote
// (its execve error, the agent's last words) after its exit.
const taskSettle = 250 * time.Millisecond

// srunTasks follows the agents' srun step task by task.
type srunTasks struct {
	a     *agents
	hosts []string // the step's nodes: task i is the agent of hosts[i]
	log   *stepLog
	read  func(string) (stepCause, bool)

	mu   sync.Mutex
	seen []bool // by task: its end read, its report on its way
	told []bool // by task: its end reported
}

// startTasks starts step, the agents' srun step over hosts, its stderr
// taken by log and read for causes by read: each task that ends is
// reported on a.ended by itself (a.ended must hold one per host and
// one more, for the step).
func (a *agents) startTasks(hosts []string, step *exec.Cmd, log *stepLog, read func(string) (stepCause, bool)) error {
	t := a.followTasks(hosts, log, read)
	step.Stderr = log
	return a.run("srun step", agentIDs(len(hosts)), step, func(e *agentEnd) bool {
		log.flush()
		e.readLog(log, read, nil)
		e.agents = t.rest()
		return len(e.agents) > 0
	})
}

// followTasks reads log for the ends of the tasks of the agents' step
// over hosts, and reports each on a.ended.
func (a *agents) followTasks(hosts []string, log *stepLog, read func(string) (stepCause, bool)) *srunTasks {
	t := &srunTasks{a: a, hosts: hosts, log: log, read: read,
		seen: make([]bool, len(hosts)), told: make([]bool, len(hosts))}
	log.onOwn = t.line
	return t
}

// line reads a line of srun's own: a task's end has its host reported,
// once. srun names the one node whose task ended; a name that is not
// one of hosts is left to the step's end (and the client's heartbeat).
func (t *srunTasks) line(l string) {
	m := reTaskEnd.FindStringSubmatch(l)
	if m == nil {
		return
	}
	i := slices.Index(t.hosts, m[1])
	if i < 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[i] {
		return
	}
	t.seen[i] = true
	time.AfterFunc(taskSettle, func() { t.report(i) })
}

// report reports task i's end, unless it was: with what srun said of
// its host, and that host's cause.
func (t *srunTasks) report(i int) {
	t.mu.Lock()
	told := t.told[i]
	t.told[i] = true
	t.mu.Unlock()
	if told {
		return
	}
	host := t.hosts[i]
	e := agentEnd{what: "srun task on " + host, agents: []string{jobenv.AgentID(i)}, status: "ended"}
	e.readLog(t.log, func(l string) (stepCause, bool) {
		c, ok := t.read(l)
		return c, ok && c.host == host
	}, namesHost(host))
	t.a.ended <- e
}

// rest marks every task reported and returns the agents of those that
// were not.
func (t *srunTasks) rest() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for i, told := range t.told {
		if !told {
			ids = append(ids, jobenv.AgentID(i))
		}
		t.told[i] = true
	}
	return ids
}
