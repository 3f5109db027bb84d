package hostagent

import (
	"errors"
	"fmt"

	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Commands of `monarch exec` (wire.OpExec). The agent runs one as the
// job's user in the job's directory, with its own environment less the
// job's variables (jobenv.Clean: no bus address, no secret) plus the
// job file's [env]: it is not a proc of the job. It has its own process
// group and the parent-death signal, stdin from /dev/null, and its
// stdout and stderr read in pieces of up to execChunk bytes, each sent
// to the asker's port as it is read, up to MaxExecOutput bytes per
// command (the rest is read and counted, not sent). Its end follows the
// last piece: once it has exited, whatever it left running in its
// process group is killed, and its pipes get OutputGrace to empty. A
// stop (OpExecStop, its timeout, or the agent's Close) sends SIGTERM to
// its process group and SIGKILL after the grace.

// MaxExecOutput bounds the output an agent sends of one command.
const MaxExecOutput = 64 << 20

// execChunk bounds a piece of output in one message.
const execChunk = 32 << 10

// execRun is a command of OpExec that runs.
type execRun struct {
	stop     chan struct{} // closed to stop it
	stopOnce sync.Once
	why      string // why it was stopped, set before stop closes
	done     chan struct{}
}

func (r *execRun) stopWith(why string) {
	r.stopOnce.Do(func() {
		r.why = why
		close(r.stop)
	})
}

// Exec runs req's command (see above), its output and end sent to
// replyProc's port. It returns at once; a command that cannot start is
// an end with status 127 (not found) or 126, and a reason naming the
// host.
func (a *Agent) Exec(req wire.ExecReq, replyProc string, replyPort uint64) {
	key := replyProc + "/" + req.ID
	run := &execRun{stop: make(chan struct{}), done: make(chan struct{})}
	a.mu.Lock()
	if a.execs[key] != nil || a.closing.Load() {
		a.mu.Unlock()
		a.sendExec(replyProc, replyPort, &wire.ExecEvent{End: true, Status: 126,
			Reason: fmt.Sprintf("refused on %s: command %s is running already, or the agent is stopping", a.cfg.Host, req.ID)})
		return
	}
	a.execs[key] = run
	a.mu.Unlock()
	go func() {
		defer func() {
			a.mu.Lock()
			delete(a.execs, key)
			a.mu.Unlock()
			close(run.done)
		}()
		end := a.runExec(req, run, func(ev *wire.ExecEvent) { a.sendExec(replyProc, replyPort, ev) })
		a.sendExec(replyProc, replyPort, end)
	}()
}

// ExecStop stops replyProc's command of req.ID, if it runs.
func (a *Agent) ExecStop(req wire.ExecStopReq, replyProc string) {
	a.mu.Lock()
	run := a.execs[replyProc+"/"+req.ID]
	a.mu.Unlock()
	if run != nil {
		run.stopWith("stopped")
	}
}

// stopExecs stops every command of OpExec and waits, bounded by their
// grace and child.KillWait, until they have ended.
func (a *Agent) stopExecs() {
	a.mu.Lock()
	runs := make([]*execRun, 0, len(a.execs))
	for _, r := range a.execs {
		runs = append(runs, r)
	}
	a.mu.Unlock()
	for _, r := range runs {
		r.stopWith("stopped: the agent is ending")
	}
	deadline := time.NewTimer(a.cfg.StopTimeout + child.KillWait + OutputGrace)
	defer deadline.Stop()
	for _, r := range runs {
		select {
		case <-r.done:
		case <-deadline.C:
			return
		}
	}
}

// runExec runs the command and returns its end; out sends each piece of
// its output.
func (a *Agent) runExec(req wire.ExecReq, run *execRun, out func(*wire.ExecEvent)) *wire.ExecEvent {
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Dir = a.cfg.Dir
	cmd.Env = append(jobenv.Clean(os.Environ()), a.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, reads, err := a.startPiped(cmd, nil)
	if err != nil {
		status := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			status = 127
		}
		return &wire.ExecEvent{End: true, Status: status, Reason: fmt.Sprintf("cannot run %s on %s: %v", req.Argv[0], a.cfg.Host, err)}
	}

	var mu sync.Mutex // the budget of output, shared by both pipes
	sent, dropped := int64(0), int64(0)
	var captured sync.WaitGroup
	for i, r := range reads {
		captured.Add(1)
		go func() {
			defer captured.Done()
			defer r.Close()
			buf := make([]byte, execChunk)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					mu.Lock()
					keep := int64(n) <= MaxExecOutput-sent
					if keep {
						sent += int64(n)
					} else {
						dropped += int64(n)
					}
					mu.Unlock()
					if keep {
						out(&wire.ExecEvent{Stream: uint8(i + 1), Data: buf[:n]})
					}
				}
				if err != nil {
					return // io.EOF, or the pipe closed after OutputGrace
				}
			}
		}()
	}

	var timeout <-chan time.Time
	if req.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	why := ""
	select {
	case <-p.Done():
	case <-run.stop:
		why = run.why
	case <-timeout:
		why = "stopped: its timeout passed"
	}
	if why != "" {
		stopGroup(p, req.Grace(a.cfg.StopTimeout))
	}
	// What it left running in its group goes with it.
	if !p.Exited() {
		<-p.Done() // only after stopGroup gave up on a process in D state
	}
	syscall.Kill(-p.Pid(), syscall.SIGKILL)
	drainPipes(&captured, reads[:], OutputGrace)
	a.forgetIfEmpty(p.Pid())

	end := &wire.ExecEvent{End: true, Status: -1, Reason: child.Describe(p.Err())}
	if ps := cmd.ProcessState; ps != nil {
		end.Status = child.ExitStatus(ps)
	}
	if why != "" {
		end.Reason += " (" + why + ")"
	}
	mu.Lock()
	end.Dropped = dropped
	mu.Unlock()
	return end
}

// stopGroup sends SIGTERM to p's process group and, once grace has
// passed, SIGKILL; it returns once p is reaped, or child.KillWait after.
func stopGroup(p *child.Process, grace time.Duration) {
	syscall.Kill(-p.Pid(), syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.Done():
		return
	case <-t.C:
	}
	p.Kill()
	k := time.NewTimer(child.KillWait)
	defer k.Stop()
	select {
	case <-p.Done():
	case <-k.C:
	}
}

// drainPipes waits until the captures have read everything; a process
// holding the pipes open gets grace, then they are closed.
func drainPipes(captured *sync.WaitGroup, reads []*os.File, grace time.Duration) {
	drained := make(chan struct{})
	go func() { captured.Wait(); close(drained) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		for _, r := range reads {
			r.Close()
		}
		<-drained
	}
}

// sendExec sends an event about a command to its asker's port.
func (a *Agent) sendExec(proc string, port uint64, ev *wire.ExecEvent) {
	a.sendToPort(proc, port, 0, 0, func(e *msgpack.Encoder) error { return e.Encode(ev) })
}
