package hostagent

import (
	"os"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/child"
)

// Starter starts the SDK procs of an agent in its own way instead of
// executing the job's program: an in-process cluster's (actorrt/actortest)
// runs each as a runtime of the process the agent is in. Commands
// (SpawnProcsReq.Command) are executed whatever the Starter.
type Starter interface {
	// Start starts a proc that reads env, the variables an executed proc
	// would get beyond this process's own (the job's contract, its rank
	// and torchrun variables, SpawnProcs' WithProcEnv): it reports ready
	// to its spawner itself, as an executed one does.
	Start(env []string) (Process, error)
}

// Process is a proc an agent started, as the agent watches and stops it.
type Process interface {
	// Pid is its process id: 0 for a proc with no process of its own,
	// which then gets no signal but SIGTERM and SIGKILL and has no
	// process group, and, having no CPU time of its own to judge its
	// silence by, is never killed as unresponsive (liveness.go).
	Pid() int
	// Done is closed once it has ended.
	Done() <-chan struct{}
	Exited() bool
	// Signal sends it sig; SIGTERM asks it to stop.
	Signal(sig os.Signal)
	// Kill ends it at once, as SIGKILL does.
	Kill()
	// End says, once Done is closed, how it ended: child.Describe's words
	// ("exited with status 1", "killed by SIGKILL") and the status a
	// shell would report (-1 if none).
	End() (reason string, status int)
}

// execProcess is a proc the agent executed.
type execProcess struct{ *child.Process }

func (p execProcess) End() (string, int) {
	status := -1
	if ps := p.Cmd.ProcessState; ps != nil {
		status = child.ExitStatus(ps)
	}
	return child.Describe(p.Err()), status
}

// stopAll ends processes together as child.StopAll does: SIGTERM to each,
// one grace period for all, then SIGKILL to those still running, and
// waits for them at most child.KillWait more.
func stopAll(ps []Process, grace time.Duration) {
	var executed []*child.Process
	var others []Process
	for _, p := range ps {
		if e, ok := p.(execProcess); ok {
			executed = append(executed, e.Process)
		} else {
			others = append(others, p)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range others {
			p.Signal(syscall.SIGTERM)
		}
		waitAll(others, grace)
		for _, p := range others {
			p.Kill()
		}
		waitAll(others, child.KillWait)
	}()
	if len(executed) > 0 {
		child.StopAll(executed, grace)
	}
	<-done
}

// waitAll waits until every process has ended, at most d.
func waitAll(ps []Process, d time.Duration) {
	until := time.NewTimer(d)
	defer until.Stop()
	for _, p := range ps {
		select {
		case <-p.Done():
		case <-until.C:
			return
		}
	}
}
