package actorrt

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// The job's record (see internal/jobstate), for `monarch status`. The
// client counts the job's procs that are up, and the hosts they run on,
// from what every proc announces when it starts (its id and host, on the
// job's up subject) and from the deaths subject. Run without a launcher
// (go run ., ./prog), the client writes the job's record itself; under
// one (monarch run, monarch local) it reports the counts to the launcher,
// which owns the record.

// jobCounts counts the procs up and their hosts (client).
type jobCounts struct {
	mu      sync.Mutex
	procs   map[string]string // proc -> host
	hosts   map[string]int    // host -> procs up there
	notProc map[string]bool   // procs that serve as simulated hosts
	// ended remembers the hosts of the last procs that ended (at most
	// maxEndedHosts), for hostOf: a failure is often told after its
	// proc's end.
	ended      map[string]string
	endedOrder []string
	// cameUp counts the procs that came up, and hostsSeen their hosts,
	// however briefly: what the record shows once the job has ended.
	cameUp    int
	hostsSeen map[string]bool
	// changed is called, under mu, after each change: it must not block.
	changed func(hosts, procs int)
}

func newJobCounts(changed func(hosts, procs int)) *jobCounts {
	return &jobCounts{procs: map[string]string{}, hosts: map[string]int{}, notProc: map[string]bool{}, ended: map[string]string{},
		hostsSeen: map[string]bool{}, changed: changed}
}

// maxEndedHosts bounds what jobCounts remembers of procs that ended.
const maxEndedHosts = 4096

// hostOf is the name of the host proc runs, or ran, on; "" if unknown.
func (c *jobCounts) hostOf(proc string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.procs[proc]; ok {
		return h
	}
	return c.ended[proc]
}

// hostsNotProcs says these procs are simulated hosts: their announcements,
// come or to come, are not counted.
func (c *jobCounts) hostsNotProcs(ids []string) {
	for _, id := range ids {
		c.mu.Lock()
		if _, counted := c.procs[id]; counted {
			c.cameUp-- // it announced itself before it was known as a host
		}
		c.mu.Unlock()
		c.gone(id)
		c.mu.Lock()
		c.notProc[id] = true
		c.mu.Unlock()
	}
}

// up takes a proc's announcement: "<proc> <host>".
func (c *jobCounts) up(data []byte) {
	proc, host, _ := strings.Cut(string(data), " ")
	if proc == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.procs[proc]; dup || c.notProc[proc] {
		return
	}
	c.procs[proc] = host
	c.hosts[host]++
	c.cameUp++
	c.hostsSeen[host] = true
	c.changed(len(c.hosts), len(c.procs))
}

// gone takes a proc's end (an agent's too: ignored, it is no proc).
func (c *jobCounts) gone(proc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	host, ok := c.procs[proc]
	if !ok {
		return
	}
	delete(c.procs, proc)
	c.ended[proc] = host
	if c.endedOrder = append(c.endedOrder, proc); len(c.endedOrder) > maxEndedHosts {
		delete(c.ended, c.endedOrder[0])
		c.endedOrder = c.endedOrder[1:]
	}
	if c.hosts[host]--; c.hosts[host] == 0 {
		delete(c.hosts, host)
	}
	c.changed(len(c.hosts), len(c.procs))
}

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
		var counts *jobCounts
		counts = newJobCounts(func(hosts, procs int) {
			everHosts, everProcs := len(counts.hostsSeen), counts.cameUp // under counts.mu
			c.record.Update(func(r *jobstate.Record) {
				r.Hosts, r.Procs = hosts, procs
				r.MaxHosts, r.MaxProcs = max(r.MaxHosts, everHosts), max(r.MaxProcs, everProcs)
			})
		})
		c.counts = counts
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
		c.counts = newJobCounts(func(hosts, procs int) {
			mu.Lock()
			now.Hosts, now.Procs = hosts, procs
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
