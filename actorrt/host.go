package actorrt

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
	"golang.org/x/sys/unix"
)

// hostAgent starts, watches and stops the procs of one host. Every process
// of a job has one, serving ThisHost(); it is driven by control messages
// (spawnprocs, stopprocs) on its proc's subject, the same way whoever
// holds a HostMesh reaches any host. Every proc it starts is the job's
// program in worker mode.
type hostAgent struct {
	rt     *runtimeT
	starts chan startReq

	mu       sync.Mutex
	children map[string]*child
	started  atomic.Bool // it has started a proc: it sends heartbeats from then on

	// What a proc runs: this program (os.Executable, os.Args) unless it is
	// a `monarch agent`, which runs the job's program.
	program string
	args    []string
	dir     string
	env     []string
}

type child struct {
	id       string
	rank     int
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has been reaped and its output sent
	stopping bool          // a stop was asked for: its end is not a failure (under hostAgent.mu)
	outputs  []*os.File    // read ends of its stdout and stderr pipes
	captured sync.WaitGroup
	waiting  [2]atomic.Bool // each capture is blocked reading its pipe: it has sent every whole line read
}

type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newHostAgent(rt *runtimeT) *hostAgent {
	h := &hostAgent{rt: rt, starts: make(chan startReq), children: map[string]*child{}}
	go h.starter()
	return h
}

// starter starts every child from one OS thread that lives as long as the
// process. Linux sends a child's Pdeathsig when the thread that forked it
// exits, not the process (golang/go#27505); a goroutine that never unlocks
// its thread keeps that thread, so children die with this process and not
// earlier.
func (h *hostAgent) starter() {
	runtime.LockOSThread()
	for r := range h.starts {
		r.done <- r.cmd.Start()
	}
}

// spawnProcs starts the requested procs; a proc that cannot be started is
// reported on the ready port. Readiness itself goes straight from each new
// proc to the requester.
func (h *hostAgent) spawnProcs(req wire.SpawnProcsReq, reply portRef) {
	rt := h.rt
	h.started.Store(true)
	exe, args := h.program, h.args
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			rt.sendErrorToPort(reply, fmt.Errorf("actorrt: SpawnProcs: find this program: %w", err))
			return
		}
		args = os.Args[1:]
	}
	for i, id := range req.IDs {
		to := reply
		to.rank = req.Ranks[i]
		cmd := exec.Command(exe, args...)
		cmd.Dir = h.dir
		cmd.Env = append(append(cleanEnv(os.Environ()), h.env...),
			envJob+"="+rt.job,
			envProc+"="+id,
			envBusURL+"="+rt.busURL,
			envBusToken+"="+rt.token,
			envParent+"="+to.proc,
			envReadyPort+"="+strconv.FormatUint(to.id, 10),
			envReadyRank+"="+strconv.Itoa(to.rank),
		)
		cmd.Env = append(cmd.Env, req.Env[i]...)
		c := &child{id: id, rank: to.rank, cmd: cmd, exited: make(chan struct{})}
		// The proc writes to its own stdout and stderr; this agent reads
		// them and sends every line to the job's log subject.
		var writeEnds []*os.File
		for range 2 {
			r, w, err := os.Pipe()
			if err != nil {
				rt.sendErrorToPort(to, fmt.Errorf("%w: proc %s: output pipe: %v", ErrProcFailed, id, err))
				return
			}
			c.outputs = append(c.outputs, r)
			writeEnds = append(writeEnds, w)
		}
		cmd.Stdout, cmd.Stderr = writeEnds[0], writeEnds[1]
		// Own process group: a terminal's Ctrl-C reaches the client only,
		// which then stops the procs in order.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		done := make(chan error, 1)
		h.starts <- startReq{cmd, done}
		err := <-done
		for _, w := range writeEnds {
			w.Close() // the child has its copies
		}
		if err != nil {
			for _, r := range c.outputs {
				r.Close()
			}
			rt.sendErrorToPort(to, fmt.Errorf("%w: start proc %s (%s) on %s: %v", ErrProcFailed, id, exe, rt.hostLabel, err))
			continue
		}
		for s, r := range c.outputs {
			c.captured.Add(1)
			go h.capture(c, logagg.Stream(s+1), r)
		}
		h.mu.Lock()
		h.children[id] = c
		h.mu.Unlock()
		go h.watch(c)
	}
}

// outputGrace bounds how long an ended proc's output may stay open.
const outputGrace = 2 * time.Second

// capture sends one output of a child to the job's log, line by line, in
// order.
func (h *hostAgent) capture(c *child, stream logagg.Stream, r *os.File) {
	defer c.captured.Done()
	defer r.Close()
	rt := h.rt
	subject := rt.logSubject()
	var buf []byte
	logagg.Capture(&idleReader{r: r, idle: &c.waiting[stream-1]}, func(text string) {
		buf = logagg.AppendLine(buf[:0], logagg.Line{Time: time.Now(), Host: rt.hostLabel, Proc: c.id, Rank: c.rank, Stream: stream, Text: text})
		rt.publish(subject, buf)
	})
}

// idleReader marks when its reader waits on the pipe: the capture then
// has no whole line left unsent.
type idleReader struct {
	r    *os.File
	idle *atomic.Bool
}

func (ir *idleReader) Read(p []byte) (int, error) {
	ir.idle.Store(true)
	n, err := ir.r.Read(p)
	ir.idle.Store(false)
	return n, err
}

// syncOutput waits (bounded) until every line the child wrote so far has
// been sent: both pipes empty and both captures waiting on them.
func (c *child) syncOutput(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		done := true
		for i, r := range c.outputs {
			if unread(r) > 0 || !c.waiting[i].Load() {
				done = false
			}
		}
		if done {
			return
		}
	}
}

// unread is the number of bytes waiting in a pipe (FIONREAD). It goes
// through SyscallConn, which leaves the file in non-blocking mode (Fd
// would not).
func unread(f *os.File) int {
	sc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	sc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n
}

// syncLogs waits until every line the given children wrote so far has
// been sent on the log subject.
func (h *hostAgent) syncLogs(ids []string) {
	var kids []*child
	h.mu.Lock()
	for _, id := range ids {
		if c := h.children[id]; c != nil {
			kids = append(kids, c)
		}
	}
	h.mu.Unlock()
	for _, c := range kids {
		c.syncOutput(5 * time.Second)
	}
}

// watch reaps a child and tells the job how it ended.
func (h *hostAgent) watch(c *child) {
	err := c.cmd.Wait()
	// Its last lines first: everything it wrote is sent before anyone
	// hears that it ended. A grandchild holding the pipes open gets
	// outputGrace, not forever.
	drained := make(chan struct{})
	go func() { c.captured.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputGrace):
		for _, r := range c.outputs {
			r.Close()
		}
		<-drained
	}
	h.mu.Lock()
	delete(h.children, c.id)
	stopped := c.stopping
	h.mu.Unlock()
	close(c.exited)
	if h.rt.closing.Load() {
		return // the whole runtime is going: nobody to tell
	}
	reason := "exited with status 0"
	if err != nil {
		reason = describeExit(err)
	}
	n := wire.GoneNotice{Proc: c.id, Reason: reason + " (host " + h.rt.hostLabel + ")", Stopped: stopped}
	if !stopped {
		h.rt.log.Warn().Str("proc", c.id).Str("reason", reason).Msg("proc ended")
	}
	// Tell this proc first (it may wait on the child), then everyone.
	h.rt.procGone(n)
	h.rt.announceGone(n)
}

func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + unix.SignalName(ws.Signal())
		}
		return "exited with status " + strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
}

// stopProcs stops the given children of this host: each is asked to exit,
// and killed once grace has passed.
func (h *hostAgent) stopProcs(ids []string, grace time.Duration) {
	var kids []*child
	h.mu.Lock()
	for _, id := range ids {
		if c := h.children[id]; c != nil {
			c.stopping = true
			kids = append(kids, c)
		}
	}
	h.mu.Unlock()
	h.stop(kids, grace)
}

// stopAll stops every child.
func (h *hostAgent) stopAll(grace time.Duration) {
	h.mu.Lock()
	kids := make([]*child, 0, len(h.children))
	for _, c := range h.children {
		c.stopping = true
		kids = append(kids, c)
	}
	h.mu.Unlock()
	h.stop(kids, grace)
}

// stop asks children to end with SIGTERM (a proc then stops its actors and
// exits), waits up to grace, and kills those still running.
func (h *hostAgent) stop(kids []*child, grace time.Duration) {
	for _, c := range kids {
		c.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, c := range kids {
		select {
		case <-c.exited:
		case <-deadline:
		}
	}
	h.kill(kids)
}

// kill ends children at once (their whole process group) and waits,
// bounded, for them to be reaped.
func (h *hostAgent) kill(kids []*child) {
	for _, c := range kids {
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	deadline := time.After(5 * time.Second)
	for _, c := range kids {
		select {
		case <-c.exited:
		case <-deadline:
			return
		}
	}
}

// cleanEnv drops the bootstrap variables of this process's own job, so a
// proc started from a proc gets only its own.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if isBootstrapVar(kv) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func isBootstrapVar(kv string) bool {
	for _, k := range []string{envJob, envProc, envBusURL, envBusToken, envParent, envReadyPort, envReadyRank} {
		if strings.HasPrefix(kv, k+"=") {
			return true
		}
	}
	// (The torchrun variables need no cleaning: each proc's own come last
	// in its environment, and the last value of a key wins.)
	return strings.HasPrefix(kv, "MONARCH_RANK_") || strings.HasPrefix(kv, "MONARCH_SIZE_") || strings.HasPrefix(kv, envAgents+"=")
}

// rankEnv tells a proc where it is: MONARCH_RANK_<DIM> and
// MONARCH_SIZE_<DIM> for each dimension of its mesh.
func rankEnv(p Point) []string {
	var env []string
	for i, d := range p.ext.dims {
		name := strings.ToUpper(strings.ReplaceAll(d.Name, "-", "_"))
		env = append(env, "MONARCH_RANK_"+name+"="+strconv.Itoa(p.coords[i]), "MONARCH_SIZE_"+name+"="+strconv.Itoa(d.Size))
	}
	return env
}
