// Package child starts, watches and stops the child processes of a
// launcher or a host agent, so that none outlives its parent.
//
// Every child is started with the parent-death signal (SIGKILL) from one
// OS thread that lives as long as the process. Linux sends a child's
// parent-death signal when the thread that forked it exits, not the
// process (golang/go#27505): a child forked from an ordinary goroutine's
// thread can be killed early, when the runtime retires that thread. One
// locked thread, started once per process, serves every Start.
//
// A Process is reaped by a goroutine of its own; Done is closed then.
// Stop and StopAll end children with SIGTERM and, after a grace period,
// SIGKILL, waiting on Done: no polling.
//
// A parent-death signal ends the child, not what the child started. A
// Keeper (keeper.go) ends the process groups its parent registered when
// the parent dies, however it dies: the parent's program run again in
// keeper mode (a program that imports this package is one, before its
// main runs), woken by EOF on a pipe only the parent writes.
package child

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// startReq asks the starter thread to start a command.
type startReq struct {
	cmd  *exec.Cmd
	cpus []int
	done chan error
}

// starts feeds the starter thread. The thread is the process's, not any
// caller's: it is started at the first Start and never ends.
var (
	starterOnce sync.Once
	starts      chan startReq
)

func starter() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the process
	for r := range starts {
		r.done <- startOn(r.cmd, r.cpus)
	}
}

// startOn starts cmd from this thread; with cpus, bound to them: a child
// inherits the CPU set of the thread that forks it, so the thread takes
// that set for the fork and its own back after. The child is bound
// before it runs an instruction of its own, threads it makes included.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("read this thread's cpus: %w", err)
	}
	set, err := cpuSet(cpus)
	if err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bind to cpus %v: %w", cpus, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	return cmd.Start()
}

func cpuSet(cpus []int) (unix.CPUSet, error) {
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return set, fmt.Errorf("cpu %d out of range", c)
		}
		set.Set(c)
	}
	return set, nil
}

// Bind binds every thread of running process pid to cpus
// (sched_setaffinity on each of /proc/pid/task): a process started
// unbound, bound later (a spare taking a slot). Threads it makes after
// inherit their maker's set; one made while Bind runs is bound too, as
// Bind reads the task list until a pass finds none new.
func Bind(pid int, cpus []int) error {
	set, err := cpuSet(cpus)
	if err != nil {
		return err
	}
	bound := map[int]bool{}
	for range 16 {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return fmt.Errorf("bind proc %d to cpus %v: %w", pid, cpus, err)
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || bound[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("bind proc %d (thread %d) to cpus %v: %w", pid, tid, cpus, err)
			}
			bound[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
	return fmt.Errorf("bind proc %d to cpus %v: it kept making threads", pid, cpus)
}

// Process is a started child.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, set before done is closed
	// terminated: StopAll sent SIGTERM already.
	terminated atomic.Bool
}

// Start starts cmd with SIGKILL as its parent-death signal (whatever else
// cmd.SysProcAttr asks for is kept) and reaps it when it ends.
func Start(cmd *exec.Cmd) (*Process, error) { return StartOn(cmd, nil) }

// StartOn is Start, the child bound to the given CPUs (sched_setaffinity;
// none: the parent's set). A set with none of the CPUs this process may
// use fails the start.
func StartOn(cmd *exec.Cmd, cpus []int) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	starterOnce.Do(func() {
		starts = make(chan startReq)
		go starter()
	})
	done := make(chan error, 1)
	starts <- startReq{cmd, cpus, done}
	if err := <-done; err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the child has ended and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the child ended (exec.Cmd.Wait's error): nil for status 0.
// Valid once Done is closed.
func (p *Process) Err() error { return p.err }

// Exited reports whether the child has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the child, unless it has ended.
func (p *Process) Signal(sig os.Signal) {
	if !p.Exited() {
		p.Cmd.Process.Signal(sig)
	}
}

// Kill ends the child at once: its whole process group when it has one of
// its own (Setpgid), so that what it started goes too.
func (p *Process) Kill() {
	if p.Exited() && !p.ownGroup() {
		return
	}
	if p.ownGroup() {
		syscall.Kill(-p.Pid(), syscall.SIGKILL)
		return
	}
	p.Cmd.Process.Kill()
}

func (p *Process) ownGroup() bool {
	a := p.Cmd.SysProcAttr
	return a != nil && a.Setpgid && a.Pgid == 0
}

// Stop ends the child: SIGTERM, then SIGKILL once grace has passed. It
// returns once the child is reaped, or KillWait after the SIGKILL.
func (p *Process) Stop(grace time.Duration) { StopAll([]*Process{p}, grace) }

// KillWait bounds how long StopAll waits for children to be reaped after
// SIGKILL (a child stuck in the kernel, in D state, may take that long).
const KillWait = 5 * time.Second

// StopAll ends children together: SIGTERM to each, one grace period for
// all, SIGKILL to those still running (and to the process groups of those
// that have their own, even when the leader has ended), then it waits, at
// most KillWait, for them to be reaped.
func StopAll(procs []*Process, grace time.Duration) {
	for _, p := range procs {
		// Once: a child stopped twice (its mesh, then its agent) gets one
		// SIGTERM, and the second stop waits and kills; a handler that
		// checkpoints on SIGTERM does not run twice.
		if p.terminated.CompareAndSwap(false, true) {
			p.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	waitAll(procs, deadline.C)
	for _, p := range procs {
		p.Kill()
	}
	reaped := time.NewTimer(KillWait)
	defer reaped.Stop()
	waitAll(procs, reaped.C)
}

// waitAll waits until every child has ended or until fires.
func waitAll(procs []*Process, until <-chan time.Time) {
	for _, p := range procs {
		select {
		case <-p.done:
		case <-until:
			return
		}
	}
}

// Describe says how a child ended, from exec.Cmd.Wait's error: "exited
// with status 0", "exited with status 3", "killed by SIGKILL".
func Describe(err error) string {
	if err == nil {
		return "exited with status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + unix.SignalName(ws.Signal())
		}
		return "exited with status " + strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
}

// ExitStatus is the status a shell would report for a child that ended
// this way: its exit code, or 128 + the signal that killed it.
func ExitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
