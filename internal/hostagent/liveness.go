package hostagent

import (
	"context"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/procstat"
)

// Liveness. A proc's end is seen at once (the agent reaps it), but a proc
// that is alive and does nothing (stopped with SIGSTOP, its runtime
// wedged) is not: its calls would wait for their deadlines and nobody
// would hear of it. So every proc beats to the agent that started it
// (OpAlive, every HeartbeatInterval, from a goroutine of its own, not its
// dispatcher), and the agent kills a proc that has shown no life, a beat
// or a line of output, for the timeout; its end is then told as
// "unresponsive".
//
// A starved machine must not make a live proc look dead: the agent judges
// from when a beat arrived, and when the agent itself was starved (its
// own ticks came late) it judges nothing that round and starts counting
// again. And a silent proc that is not stopped and used CPU since the
// agent last looked is working, its beats late behind a flood on the
// same links: it gets a fresh start, not SIGKILL. (A runtime wedged in a
// busy loop is not caught; one wedged asleep, or stopped, is.)

// Alive records a beat of the proc named.
func (a *Agent) Alive(id string) {
	a.mu.Lock()
	p := a.children[id]
	a.mu.Unlock()
	if p != nil && p.lastAlive.Swap(time.Now().UnixNano()) == 0 {
		close(p.up)
	}
}

// WatchLiveness kills the procs of this agent silent for timeout, until
// ctx ends.
func (a *Agent) WatchLiveness(ctx context.Context, timeout time.Duration) {
	interval := max(timeout/8, 50*time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Now, not the tick's own time: a starved goroutine gets an
			// old tick, and the gap is what tells it it was starved.
			now := time.Now()
			starved := now.Sub(last) > 4*interval
			last = now
			a.judge(now, timeout, starved)
		}
	}
}

// judge kills the procs silent for timeout; after a round in which this
// agent was starved itself, it gives every proc a fresh start instead.
func (a *Agent) judge(now time.Time, timeout time.Duration, starved bool) {
	a.mu.Lock()
	var silent []*proc
	for _, p := range a.children {
		la := p.lastAlive.Load()
		switch {
		case la == 0 || p.stopping:
		case starved:
			p.lastAlive.Store(now.UnixNano())
		case now.Sub(time.Unix(0, la)) > timeout && !p.unresponsive.Load():
			if p.busy() {
				p.lastAlive.Store(now.UnixNano())
				continue
			}
			silent = append(silent, p)
		}
	}
	a.mu.Unlock()
	for _, p := range silent {
		p.unresponsive.Store(true)
		a.cfg.Log.Warn().Str("proc", p.id).Dur("silent", timeout).Msg("proc unresponsive: killing it")
		p.process.Kill()
		// A stopped process takes SIGKILL at once; make sure it does not
		// wait on a SIGCONT first.
		if pid := p.process.Pid(); pid > 0 {
			syscall.Kill(-pid, syscall.SIGCONT)
		}
	}
}

// busy reports whether the proc is not stopped and used CPU since the
// last call (false where /proc cannot be read). A proc with no process of
// its own (Process.Pid 0, an in-process cluster's) cannot be stopped and
// has no CPU time of its own: its silence is its process's starvation,
// so it is taken to be working.
func (p *proc) busy() bool {
	pid := p.process.Pid()
	if pid <= 0 {
		return true
	}
	st, err := procstat.Read(pid)
	if err != nil || st.Stopped() {
		return false
	}
	return st.CPUTicks > p.cpuTicks.Swap(st.CPUTicks)
}
