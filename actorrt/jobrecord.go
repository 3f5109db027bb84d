package actorrt

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/jobview"
)

// The job's record (see internal/jobstate), for `monarch status`. The
// client counts the job's procs that are up, and the hosts they run on
// (jobview.Counts), from what every proc announces when it starts (its id
// and host, on the job's up subject) and from the deaths subject. Run without a launcher
// (go run ., ./prog), the client writes the job's record itself; under
// one (monarch run, monarch local) it reports the counts to the launcher,
// which owns the record.

// openJobRecord starts the job's record for a client without a launcher.
// The program runs even if the record cannot be written (the state dir
// refused, say): that is reported, not fatal.
func (c *client) openJobRecord() {
	rec := jobstate.Record{Job: c.job, Scheduler: jobstate.Direct, Program: os.Args[0], State: jobstate.Running, Started: time.Now()}
	rec.Self()
	w, err := jobstate.NewWriter(hostsconfig.StateDir(), rec)
	if err != nil {
		c.log.Warn().Err(err).Msg("the job will not be listed by monarch status")
		return
	}
	c.record = w
}

// startCounting sets up the counts, which go to the job's record or to
// the launcher (at most every jobstate.MinInterval); the client then
// subscribes to the up subject.
func (c *client) startCounting() {
	if c.record != nil {
		c.counts = jobview.NewCounts(func(n jobview.CountsNow) {
			c.record.Update(func(r *jobstate.Record) {
				r.Hosts, r.Procs = n.Hosts, n.Procs
				r.MaxHosts, r.MaxProcs = max(r.MaxHosts, n.EverHosts), max(r.MaxProcs, n.EverProcs)
			})
		})
	} else {
		subject := c.subjects.Counts()
		var mu sync.Mutex
		var now struct{ Hosts, Procs int }
		report := newCoalescer(jobstate.MinInterval, func() {
			mu.Lock()
			b, _ := json.Marshal(map[string]int{"hosts": now.Hosts, "procs": now.Procs})
			mu.Unlock()
			c.publish(subject, b)
		})
		c.counts = jobview.NewCounts(func(n jobview.CountsNow) {
			mu.Lock()
			now.Hosts, now.Procs = n.Hosts, n.Procs
			mu.Unlock()
			report.poke()
		})
	}
}

// finishJobRecord records how the job ended, and what failed (f, or
// nil), when the client keeps the record.
func (c *client) finishJobRecord(code int, stopped bool, f *Failure) {
	if c.record == nil {
		return
	}
	state, end := jobstate.Done, "done"
	switch {
	case stopped:
		state, end = jobstate.Stopped, "stopped"
	case code != 0:
		state, end = jobstate.Failed, fmt.Sprintf("failed (exit %d)", code)
		if f != nil {
			end = "failed: " + f.Summary
		}
	}
	err := c.record.Finish(func(r *jobstate.Record) {
		r.State, r.Exit, r.Hosts, r.Procs, r.End, r.Failure = state, code, 0, 0, end, f
	})
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot record the job's end")
	}
}

// coalescer runs fn after poke, at most once per interval and always
// after the last poke, on a timer goroutine.
type coalescer struct {
	interval time.Duration
	fn       func()

	mu      sync.Mutex
	pending bool
	last    time.Time
	timer   *time.Timer
}

func newCoalescer(interval time.Duration, fn func()) *coalescer {
	return &coalescer{interval: interval, fn: fn}
}

func (c *coalescer) poke() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending {
		return
	}
	c.pending = true
	wait := max(0, c.interval-time.Since(c.last))
	if c.timer == nil {
		c.timer = time.AfterFunc(wait, c.run)
	} else {
		c.timer.Reset(wait)
	}
}

func (c *coalescer) run() {
	c.mu.Lock()
	c.pending = false
	c.last = time.Now()
	c.mu.Unlock()
	c.fn()
}
