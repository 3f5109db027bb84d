package hostagent

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/logagg"
	"golang.org/x/sys/unix"
)

// proc is a proc this agent started: the process and the capture of its
// output.
type proc struct {
	id string
	// label is what its lines carry: its proc mesh's name and its rank
	// (a spare's change when it takes a slot).
	label   atomic.Pointer[lineLabel]
	command bool       // it runs a command, not an SDK proc: its end is its own business
	boot    *bootstrap // how it was started (a spare's: the slot's, once it took one): what RespawnProc starts again (under Agent.mu)
	// spare: an idle spare of boot.pool, with no rank yet (under
	// Agent.mu); hand, once one takes a slot, until it says it has.
	spare    bool
	hand     *handoff
	process  Process
	ended    chan struct{} // closed once reaped and its output sent
	stopping bool          // a stop was asked for while it ran: its end is not a failure (under Agent.mu)
	outputs  []*os.File    // read ends of its stdout and stderr pipes
	captured sync.WaitGroup
	waiting  [2]atomic.Bool // each capture is blocked reading its pipe: it has sent every whole line read
	// lastAlive is when the proc last showed life (a beat, or output), as
	// Unix nanoseconds; 0 until its first beat: a proc that has not yet
	// started its runtime is the spawn's to time out, not liveness's.
	lastAlive atomic.Int64
	up        chan struct{} // closed at its first beat
	// unresponsive is set when liveness killed it: its end says why.
	unresponsive atomic.Bool
	// cpuTicks is its CPU time when liveness last looked (see busy).
	cpuTicks atomic.Int64
	// lastErr is when its last stderr line was read, as Unix nanoseconds;
	// 0: none yet.
	lastErr atomic.Int64
}

// lineLabel is what a proc's lines carry besides its id.
type lineLabel struct {
	mesh string
	rank int
}

// startPiped starts cmd bound to cpus (none: any), its stdout and stderr
// each into a pipe whose read end it returns (stdout first). A child in a
// process group of its own has its group kept by the agent's keeper
// (keeper.go).
func (a *Agent) startPiped(cmd *exec.Cmd, cpus []int) (*child.Process, [2]*os.File, error) {
	var reads, writes [2]*os.File
	closeAll := func(fs [2]*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(reads)
			closeAll(writes)
			return nil, reads, fmt.Errorf("output pipe: %w", err)
		}
		reads[i], writes[i] = r, w
	}
	cmd.Stdout, cmd.Stderr = writes[0], writes[1]
	process, err := child.StartOn(cmd, cpus)
	closeAll(writes) // the child has its copies
	if err != nil {
		closeAll(reads)
		return nil, reads, err
	}
	if cmd.SysProcAttr.Setpgid {
		a.keep(process.Pid())
	}
	return process, reads, nil
}

// start starts cmd as proc id, bound to cpus (none: any), its stdout and
// stderr captured onto the job's log subject.
func (a *Agent) start(id string, label lineLabel, cmd *exec.Cmd, cpus []int) (*proc, error) {
	p := &proc{id: id, ended: make(chan struct{}), up: make(chan struct{})}
	p.label.Store(&label)
	process, outputs, err := a.startPiped(cmd, cpus)
	if err != nil {
		return nil, err
	}
	p.outputs = outputs[:]
	p.process = execProcess{process}
	for s, r := range p.outputs {
		p.captured.Add(1)
		go a.capture(p, logagg.Stream(s+1), r)
	}
	return p, nil
}

// capture sends one output of a proc to the job's log, line by line, in
// order.
func (a *Agent) capture(p *proc, stream logagg.Stream, r *os.File) {
	defer p.captured.Done()
	defer r.Close()
	subject := a.subjects.Log()
	var buf []byte
	logagg.Capture(&idleReader{r: r, idle: &p.waiting[stream-1]}, func(text string) {
		now := time.Now()
		if p.lastAlive.Load() != 0 {
			p.lastAlive.Store(now.UnixNano()) // writing is living
		}
		if stream == logagg.Stderr {
			p.lastErr.Store(now.UnixNano())
		}
		var l lineLabel
		if pl := p.label.Load(); pl != nil {
			l = *pl
		}
		buf = logagg.AppendLine(buf[:0], logagg.Line{Time: now, Host: a.cfg.Host, Proc: p.id, Mesh: l.mesh, Rank: l.rank, Stream: stream, Text: text})
		a.link.Publish(subject, buf)
	})
}

// drainOutput waits until the captures have sent everything the proc
// wrote; a grandchild holding the pipes open gets grace, then the pipes
// are closed.
func (p *proc) drainOutput(grace time.Duration) {
	drained := make(chan struct{})
	go func() { p.captured.Wait(); close(drained) }()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		for _, r := range p.outputs {
			r.Close()
		}
		<-drained
	}
}

// idleReader marks when its reader waits on the pipe: the capture then
// has no whole line left unsent.
type idleReader struct {
	r    *os.File
	idle *atomic.Bool
}

func (ir *idleReader) Read(b []byte) (int, error) {
	ir.idle.Store(true)
	n, err := ir.r.Read(b)
	ir.idle.Store(false)
	return n, err
}

// syncOutput waits (at most d) until every line the proc wrote so far has
// been sent: both pipes empty and both captures waiting on them. Nothing
// signals that moment, so it looks every millisecond.
func (p *proc) syncOutput(d time.Duration) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		done := true
		for i, r := range p.outputs {
			if unread(r) > 0 || !p.waiting[i].Load() {
				done = false
			}
		}
		if done {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-p.ended:
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
