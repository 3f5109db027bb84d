package launch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
)

// agents is the set of host agents a launcher started: local processes,
// one srun step, or ssh sessions. Each ends by itself when the job's bus
// goes away; stop ends them sooner.
type agents struct {
	n     int
	ended chan agentEnd // one per process (the srun step counts as one)

	mu     sync.Mutex
	cmds   []*exec.Cmd
	stdins []io.WriteCloser // ssh: closing one ends that agent
}

// agentEnd reports a launcher process that ended: which host (or "srun"),
// how, and the last lines it wrote to stderr.
type agentEnd struct {
	what   string
	agents []string // the agents this process held: one, or a whole srun step
	err    error
	tail   string
}

func (e agentEnd) String() string {
	status := "exited with status 0"
	if e.err != nil {
		status = describeStatus(e.err)
	}
	if e.tail != "" {
		return fmt.Sprintf("%s %s: %s", e.what, status, e.tail)
	}
	return e.what + " " + status
}

func describeStatus(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + strconv.Itoa(int(ws.Signal()))
		}
		return "exited with status " + strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
}

// agentCommand is the monarch agent command line: everything but the
// secret, which goes by environment (local, srun) or stdin (ssh).
func agentCommand(monarch, jobID string, job *hostsconfig.Job, index string) []string {
	args := []string{monarch, "agent", "--job", jobID, "--program", job.Program, "--dir", job.Dir}
	if index == "slurm" {
		args = append(args, "--slurm")
	} else {
		args = append(args, "--index", index)
	}
	for _, kv := range job.Env {
		args = append(args, "--env", kv)
	}
	return append(append(args, "--"), job.Args...)
}

// start runs cmd and reports its end on a.ended, with the tail of its
// stderr (which also goes to w).
func (a *agents) start(what string, ids []string, cmd *exec.Cmd, w io.Writer) error {
	tail := &tailWriter{max: 4}
	cmd.Stderr = io.MultiWriter(w, tail)
	if err := startOnLockedThread(cmd); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	a.mu.Lock()
	a.cmds = append(a.cmds, cmd)
	a.mu.Unlock()
	go func() {
		err := cmd.Wait()
		a.ended <- agentEnd{what: what, agents: ids, err: err, tail: tail.String()}
	}()
	return nil
}

// stop ends every agent: stdin closed (ssh), SIGTERM, then SIGKILL after
// grace; it returns when all are reaped or grace+5s have passed.
func (a *agents) stop(grace time.Duration) {
	a.mu.Lock()
	cmds, stdins := a.cmds, a.stdins
	a.mu.Unlock()
	for _, w := range stdins {
		w.Close()
	}
	for _, c := range cmds {
		if c.ProcessState == nil {
			c.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && a.running(cmds) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range cmds {
		c.Process.Kill()
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && a.running(cmds); {
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *agents) running(cmds []*exec.Cmd) bool {
	for _, c := range cmds {
		// Signal 0 fails once the process has been reaped.
		if c.Process.Signal(syscall.Signal(0)) == nil {
			return true
		}
	}
	return false
}

// startLocal starts n agents on this machine, as simulated hosts.
func startLocal(n int, monarch, jobID, url, token string, dialEnv []string, job *hostsconfig.Job, stderr io.Writer) (*agents, error) {
	a := &agents{n: n, ended: make(chan agentEnd, n)}
	for i := 0; i < n; i++ {
		argv := agentCommand(monarch, jobID, job, strconv.Itoa(i))
		cmd := exec.Command(argv[0], argv[1:]...)
		// MONARCH_HOST_NAME: the simulated hosts all run on this machine;
		// their lines are told apart by these names, the ones status and
		// the system logs use.
		cmd.Env = append(append(os.Environ(), bus.EnvURL+"="+url, bus.EnvToken+"="+token,
			"MONARCH_HOST_NAME=h"+strconv.Itoa(i)), dialEnv...)
		cmd.Stdout = os.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := a.start("agent h"+strconv.Itoa(i), []string{"h" + strconv.Itoa(i)}, cmd, stderr); err != nil {
			a.stop(time.Second)
			return nil, err
		}
	}
	return a, nil
}

// tailWriter keeps the last lines written to it.
type tailWriter struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(t.part[:i])); line != "" {
			t.lines = append(t.lines, line)
			if len(t.lines) > t.max {
				t.lines = t.lines[1:]
			}
		}
		t.part = t.part[i+1:]
	}
	if len(t.part) > 4096 {
		t.part = t.part[len(t.part)-4096:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if s := strings.TrimSpace(string(t.part)); s != "" {
		lines = append(lines, s)
	}
	return strings.Join(lines, " | ")
}
