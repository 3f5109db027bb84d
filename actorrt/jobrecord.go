package actorrt

import (
	"context"
	"encoding/json"
	"errors"
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
// which owns the record. A client that exits with a failure reports what
// failed (Failure) there too: in the record, or to the launcher on the
// job's failure subject.

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

// The failure a client ends with. Before a client exits with a failure
// it says what failed: to its launcher, as one JSON message on the job's
// failure subject (the launcher records it and ends its output with its
// summary, `monarch status JOB` shows it), or, run without a launcher, in
// the job's record, which it keeps itself.

// Failure is what a job's client reports of the failure that ends it:
// the member (an SPMD rank, an actor) that failed, where, how, and the
// last lines it wrote to stderr. A program sets it on the ExitError its
// function returns (spmd does); an unhandled MeshFailure or another
// error makes one of its own.
//
// Its fields, as the job's record keeps them (the type is the record's):
//
//	Summary string   // one line: "rank 3 on h2 exited with status 1"
//	Mesh    string   // the mesh of the member that failed ("" for none)
//	Rank    int      // its rank; -1 for none
//	Host    string   // its host's name
//	Exit    int      // its exit status
//	Signal  string   // the signal that ended it ("" for none)
//	Tail    []string // the last lines it wrote to stderr, at most MaxTail
type Failure = jobstate.Failure

// MaxTail bounds Failure.Tail. The job record keeps as many lines
// (bounds_test.go does not compile if the two bounds differ).
const MaxTail = 20

// failureOf is the Failure of a client that ends with status code
// because of err (its function's error, or the unhandled failure the
// fault hook returned); nil when code is 0.
func (c *client) failureOf(err error, code int) *Failure {
	if code == 0 {
		return nil
	}
	var exit *ExitError
	if errors.As(err, &exit) && exit.Failure != nil {
		f := *exit.Failure
		if len(f.Tail) > MaxTail {
			f.Tail = f.Tail[len(f.Tail)-MaxTail:]
		}
		return &f
	}
	var mf *MeshFailure
	if errors.As(err, &mf) {
		host := c.counts.HostOf(mf.Proc)
		where := mf.Proc
		if host != "" {
			where = host
		}
		return &Failure{Summary: fmt.Sprintf("actor %s of mesh %s on %s failed: %s", mf.ActorID, mf.Mesh, where, mf.Reason),
			Mesh: mf.Mesh, Rank: mf.Base, Host: host}
	}
	f := &Failure{Summary: fmt.Sprintf("exited with status %d", code), Rank: -1, Exit: code}
	if err != nil && (exit == nil || exit.Err != nil) {
		f.Summary = err.Error()
	}
	return f
}

// failureWait bounds how long a client waits for its failure report to
// reach the bus before it exits.
const failureWait = 2 * time.Second

// reportFailure tells the launcher what failed, over the bus, and
// waits (bounded) until the message has left. A client that keeps the
// record itself writes it there instead (finishJobRecord).
func (c *client) reportFailure(f *Failure) {
	if f == nil || c.record != nil {
		return
	}
	b, err := json.Marshal(f)
	if err == nil {
		err = c.publish(c.subjects.Failure(), b)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), failureWait)
		err = c.link.Flush(ctx)
		cancel()
	}
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot tell the launcher what failed")
	}
}
