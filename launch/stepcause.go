package launch

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/internal/jobenv"
)

// What a failed srun step or ssh session said, read for its cause: which
// host failed first and in its own words why. srun reports for every
// node, and tearing the step down after one fails makes the others'
// lines ("Killed", "CANCELLED") come last: the tail of its stderr names
// the wrong host. So each line is read for a host and an error, ranked,
// and the first line of the best rank wins.

// stepCause is a failed host and what it said.
type stepCause struct {
	host string // "" when the line names none (slurmstepd without a node)
	msg  string
	rank int // causeLaunch, causeExit or causeKilled: lower is nearer the cause
}

// Ranks of causes.
const (
	causeLaunch = iota // the host's own error: launch failed, no binary, node failure, the agent's message
	causeExit          // the agent exited with a status
	causeKilled        // the agent was killed: often by the teardown another host's failure began
	notCause
)

// causeContext is what a line is read against: the hosts of the job in
// order (to name an agent's host by its id) and the monarch binary the
// agents run, with the key that sets it.
type causeContext struct {
	hosts   []string
	monarch string // the path tried on the hosts
	key     string // "[slurm] monarch", "[ssh] monarch"
	keySet  bool   // the hosts file gives the key (else the path is the launcher's own)
	session string // the host of an ssh session: every line is its
}

var (
	reTaskLaunch = regexp.MustCompile(`^srun: error: Task launch for StepId=\S+ failed on node ([^\s:]+): (.*)$`)
	reTaskEnd    = regexp.MustCompile(`^srun: error: ([^\s:]+): tasks? [0-9,\-\[\]]+: (.*)$`)
	reNodeFail   = regexp.MustCompile(`^srun: error: Node failure on ([^\s:]+)`)
	reStepCreate = regexp.MustCompile(`^srun: error: Unable to create step for job \S+: (.*)$`)
	reStepd      = regexp.MustCompile(`^slurmstepd(?:-([^\s:]+))?: error: (.*)$`)
	reExecve     = regexp.MustCompile(`^execve\(\): (.*): ([^:]+)$`)
	reCancelled  = regexp.MustCompile(`^\*\*\* (?:STEP|JOB) \S+ ON (\S+) CANCELLED AT \S+ DUE TO (.*?) \*\*\*`)
	reAgentSaid  = regexp.MustCompile(`^monarch agent (on )?([^\s:]+): (.*)$`)
	reSSHConnect = regexp.MustCompile(`^ssh: connect to host (\S+) port (\d+): (.*)$`)
	reSSHResolve = regexp.MustCompile(`^ssh: Could not resolve hostname ([^\s:]+): (.*)$`)
	reEnvMissing = regexp.MustCompile(`^env: ['‘"]?(.*?)['’"]?: (No such file or directory|Permission denied)$`)
	reShMissing  = regexp.MustCompile(`^(?:ba|da|z|k)?sh: (?:line \d+: |\d+: )?(\S+): (No such file or directory|Permission denied|not found|command not found)$`)
	reExitCode   = regexp.MustCompile(`^Exited with exit code (\d+)$`)
)

// readSrun reads one line of srun's stderr.
func (c causeContext) readSrun(line string) (stepCause, bool) {
	if m := reTaskLaunch.FindStringSubmatch(line); m != nil {
		return stepCause{m[1], "Slurm could not launch its agent: " + m[2], causeLaunch}, true
	}
	if m := reNodeFail.FindStringSubmatch(line); m != nil {
		return stepCause{m[1], "node failure (Slurm lost the node)", causeLaunch}, true
	}
	if m := reStepCreate.FindStringSubmatch(line); m != nil {
		return stepCause{"", "Slurm would not start the agents' step: " + m[1], causeLaunch}, true
	}
	if m := reTaskEnd.FindStringSubmatch(line); m != nil {
		if e := reExitCode.FindStringSubmatch(m[2]); e != nil {
			return stepCause{m[1], "its agent exited with status " + e[1], causeExit}, true
		}
		if m[2] == "Killed" || m[2] == "Terminated" {
			return stepCause{m[1], "its agent was killed (" + m[2] + ")", causeKilled}, true
		}
		return stepCause{m[1], "its agent ended: " + m[2], causeExit}, true
	}
	if m := reStepd.FindStringSubmatch(line); m != nil {
		if e := reExecve.FindStringSubmatch(m[2]); e != nil {
			return stepCause{m[1], c.cannotRun(m[1], e[1], e[2]), causeLaunch}, true
		}
		if e := reCancelled.FindStringSubmatch(m[2]); e != nil {
			return stepCause{e[1], "Slurm cancelled the step: " + strings.ToLower(e[2]), causeLaunch}, true
		}
	}
	return c.readAgent(line)
}

// readAgent reads a line an agent wrote itself (cmd_agent: "monarch agent
// on HOST: ..."; older agents named their index: "monarch agent h1: ...").
func (c causeContext) readAgent(line string) (stepCause, bool) {
	m := reAgentSaid.FindStringSubmatch(line)
	if m == nil {
		return stepCause{}, false
	}
	host := m[2]
	if m[1] == "" {
		host = agentHost(c.hosts, host)
	}
	if c.session != "" {
		host = c.session
	}
	return stepCause{host, "its agent said: " + m[3], causeLaunch}, true
}

// readSSH reads one line of an ssh session's stderr: ssh's own, the
// remote shell's (the session runs `env VAR=... monarch agent ...`), or
// the agent's.
func (c causeContext) readSSH(line string) (stepCause, bool) {
	h := c.session
	if m := reSSHConnect.FindStringSubmatch(line); m != nil {
		return stepCause{h, fmt.Sprintf("ssh cannot connect to %s port %s: %s", m[1], m[2], m[3]), causeLaunch}, true
	}
	if m := reSSHResolve.FindStringSubmatch(line); m != nil {
		return stepCause{h, "ssh cannot resolve the host's name: " + m[2], causeLaunch}, true
	}
	if m := reEnvMissing.FindStringSubmatch(line); m != nil {
		return stepCause{h, c.cannotRun(h, m[1], m[2]), causeLaunch}, true
	}
	if m := reShMissing.FindStringSubmatch(line); m != nil {
		return stepCause{h, c.cannotRun(h, m[1], m[2]), causeLaunch}, true
	}
	for _, p := range []string{"ssh: ", "Permission denied", "Host key verification failed", "kex_exchange_identification: ", "Connection closed by ", "Connection reset by ", "Bad owner or permissions", "Load key "} {
		if strings.HasPrefix(line, p) {
			return stepCause{h, "ssh: " + strings.TrimPrefix(line, "ssh: "), causeLaunch}, true
		}
	}
	if strings.HasPrefix(line, "Connection to ") && strings.Contains(line, " closed") {
		return stepCause{h, "ssh: " + line, causeKilled}, true
	}
	return c.readAgent(line)
}

// cannotRun says that path could not be run on host: when it is the
// monarch binary, with the key that sets where it is.
func (c causeContext) cannotRun(host, path, why string) string {
	on := ""
	if host != "" {
		on = " on " + host
	}
	if path != c.monarch && !(path == "monarch" && c.monarch == "") {
		return fmt.Sprintf("cannot run %s%s: %s", path, on, why)
	}
	if c.keySet {
		return fmt.Sprintf("cannot run monarch at %s%s (%s): %s sets monarch's path on the hosts", path, on, why, c.key)
	}
	return fmt.Sprintf("cannot run monarch at %s%s (%s): that is the launcher's own path, as %s is not set: set it to monarch's path on the hosts", path, on, why, c.key)
}

// firstCause reads lines (in order) with read and returns the cause of
// the best rank that came first; ok false when no line tells one. A cause
// without a host takes the host of the first cause that has one.
func firstCause(lines []string, read func(string) (stepCause, bool)) (stepCause, bool) {
	best := stepCause{rank: notCause}
	anyHost := ""
	for _, l := range lines {
		c, ok := read(l)
		if !ok {
			continue
		}
		if anyHost == "" && c.host != "" {
			anyHost = c.host
		}
		if c.rank < best.rank {
			best = c
		}
	}
	if best.rank == notCause {
		return stepCause{}, false
	}
	if best.host == "" {
		best.host = anyHost
	}
	return best, true
}

// String is the cause as the end's message gives it.
func (c stepCause) String() string {
	if c.host == "" {
		return c.msg
	}
	return "first failing host " + c.host + ": " + c.msg
}

// hostFirst orders lines for a message: those that name host first (the
// first failing host's), the others after, each group in its order.
func hostFirst(lines []string, host string) []string {
	if host == "" {
		return lines
	}
	names := namesHost(host)
	out := slices.Clip(slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return !names(l) }))
	for _, l := range lines {
		if !names(l) {
			out = append(out, l)
		}
	}
	return out
}

// namesHost tells the lines that name host (slurmstepd-h2: names h2).
func namesHost(host string) func(string) bool {
	name := regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(host) + `($|[^\w.-])`)
	return name.MatchString
}

// agentHost names the host of agent id ("h1" is host 1 of hosts);
// id itself when hosts does not say.
func agentHost(hosts []string, id string) string {
	if !jobenv.IsAgentID(id) {
		return id
	}
	if n, _ := strconv.Atoi(id[1:]); n < len(hosts) {
		return hosts[n]
	}
	return id
}
