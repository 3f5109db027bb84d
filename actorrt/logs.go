package actorrt

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/logagg"
)

// Logs. Every proc's stdout and stderr are read by its host agent, cut in
// lines and sent on the job's log subject (see host.go). The client
// receives them all: it records them in the job's log (for `monarch logs`)
// and prints them, raw with a [rank] prefix ([mesh rank] once procs of
// a second mesh have printed) or, for procs given an aggregation window, grouped:
// "[37 similar log lines] [3] step 100 ...". Printing happens off the
// dispatcher, so a slow terminal never holds up messages to actors.
// Under a launcher that captures the client program's own output
// (jobenv.OutputVar), the procs' lines are printed to the launcher's
// stdout and stderr, and the program's lines, which the launcher sends
// on the log subject as the client's, are recorded, not printed again.
// The client keeps the last stderr lines of each proc (a small ring:
// MaxTail lines of at most 256 bytes) for the failure a rank's end makes.

// LogOptions says how the client shows the output of a mesh's procs.
type LogOptions struct {
	// StreamToClient prints the procs' lines on the client's stdout and
	// stderr. Lines are recorded in the job's log either way.
	StreamToClient bool
	// AggregateWindow, when positive, groups similar lines written within
	// each window and prints one line per group.
	AggregateWindow time.Duration
}

// SetLogOptions sets how the client shows the output of these procs
// (every proc of the mesh, slices included). Call it from the client.
func (p *ProcMesh) SetLogOptions(ctx context.Context, o LogOptions) error {
	rt, err := p.runtime()
	if err != nil {
		return err
	}
	c := rt.client()
	if c == nil {
		return fmt.Errorf("actorrt: SetLogOptions is the client's: call it from Main's function")
	}
	if o.AggregateWindow < 0 {
		return fmt.Errorf("%w: aggregate window %v", ErrBadArgs, o.AggregateWindow)
	}
	// Lines written so far keep the options they were written under.
	if err := p.FlushLogs(ctx); err != nil {
		return err
	}
	c.logs.setOptions(p.ids(), o)
	return nil
}

// clientLogs receives, records and prints the job's lines.
type clientLogs struct {
	store   *logagg.Writer
	stderr  *os.File // where the procs' stderr lines are printed: the terminal's, not the program's (see ClientOutput)
	def     LogOptions
	out     *logagg.Printer // used by the printer goroutine (run) only
	flushes chan flushReq
	wake    chan struct{}
	done    chan struct{}

	mu    sync.Mutex
	queue []logagg.Line
	opts  map[string]LogOptions
	tails map[string]*stderrTail // proc -> its last stderr lines
	// recent is a ring of the last lines received, for the job state
	// feed (recentLines, jobside.go); nRecent counts the lines it took.
	recent  [jobctl.MaxLogLines]logagg.Line
	nRecent int64

	lines atomic.Int64 // lines received
	bad   atomic.Int64 // messages that could not be decoded

	// ends is closed once the launcher has sent the end of both the
	// client's stdout and stderr (jobenv.OutputEnd), or at once when it
	// does not capture them; endsSeen counts them (dispatcher only).
	ends     chan struct{}
	endsSeen [3]bool
}

func newClientLogs(c *client, env jobenv.Env) *clientLogs {
	stdout, stderr, captured := jobenv.ClientOutput()
	l := &clientLogs{
		stderr:  stderr,
		def:     LogOptions{StreamToClient: true},
		out:     logagg.NewPrinter(stdout, stderr),
		ends:    make(chan struct{}),
		flushes: make(chan flushReq),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		opts:    map[string]LogOptions{},
		tails:   map[string]*stderrTail{},
	}
	// A launcher passes the job file's [log] options.
	if !captured {
		close(l.ends) // nobody captures this process's output: nothing to wait for
	}
	if env.LogStream != nil {
		l.def.StreamToClient = *env.LogStream
	}
	l.def.AggregateWindow = env.LogWindow
	store, err := logagg.NewWriter(hostsconfig.StateDir(), c.job, logagg.DefaultMaxBytes)
	if err != nil {
		c.log.Warn().Err(err).Msg("the job's log will not be recorded")
	} else {
		l.store = store
	}
	return l
}

// receive takes one line message, on the dispatcher goroutine.
func (l *clientLogs) receive(data []byte) {
	line, err := logagg.ParseLine(data)
	if err != nil {
		l.bad.Add(1)
		return
	}
	if line.Proc == logagg.ClientProc && line.Text == jobenv.OutputEnd {
		l.endOf(line.Stream)
		return
	}
	l.lines.Add(1)
	l.mu.Lock()
	if line.Stream == logagg.Stderr && line.Proc != logagg.ClientProc {
		t := l.tails[line.Proc]
		if t == nil && len(l.tails) < maxTails {
			t = &stderrTail{}
			l.tails[line.Proc] = t
		}
		t.add(line.Text)
	}
	l.recent[l.nRecent%jobctl.MaxLogLines] = line
	l.nRecent++
	l.queue = append(l.queue, line)
	first := len(l.queue) == 1
	l.mu.Unlock()
	if first {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// setOptions applies new options to procs, on the printer goroutine, once
// the lines received so far are printed under the old ones.
func (l *clientLogs) setOptions(procs []string, o LogOptions) {
	l.request(func() {
		l.mu.Lock()
		for _, p := range procs {
			l.opts[p] = o
		}
		l.mu.Unlock()
	})
}

// endOf takes the end of one of the client's own outputs, on the
// dispatcher goroutine.
func (l *clientLogs) endOf(s logagg.Stream) {
	if s != logagg.Stdout && s != logagg.Stderr || l.endsSeen[s] {
		return
	}
	l.endsSeen[s] = true
	if l.endsSeen[logagg.Stdout] && l.endsSeen[logagg.Stderr] {
		select {
		case <-l.ends:
		default:
			close(l.ends)
		}
	}
}

// outputEndWait bounds how long a client waits for the end of its own
// output to come back from its launcher.
const outputEndWait = 2 * time.Second

// endOutput marks the end of the client's own output, when its launcher
// captures it, and waits (at most outputEndWait) until the launcher has
// sent every line before it: the program's last lines are in the job's
// log. Call it once the program has written its last line.
func (l *clientLogs) endOutput() {
	select {
	case <-l.ends:
		return // not captured
	default:
	}
	os.Stdout.WriteString(jobenv.OutputEnd + "\n")
	os.Stderr.WriteString(jobenv.OutputEnd + "\n")
	timer := time.NewTimer(outputEndWait)
	defer timer.Stop()
	select {
	case <-l.ends:
	case <-timer.C:
	}
}

// flush prints (and records) every line received so far, including
// pending aggregation groups: the flush barrier. Bounded.
func (l *clientLogs) flush() { l.request(nil) }

// flushReq asks the printer to print everything it has, then run then.
type flushReq struct {
	then func()
	ack  chan struct{}
}

func (l *clientLogs) request(then func()) {
	ack := make(chan struct{})
	select {
	case l.flushes <- flushReq{then, ack}:
	case <-l.done:
		return
	case <-time.After(5 * time.Second):
		return
	}
	select {
	case <-ack:
	case <-time.After(5 * time.Second):
	}
}

// run prints until ctx ends, then flushes one last time.
func (l *clientLogs) run(ctx context.Context) {
	defer close(l.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.wake:
			l.drain()
		case now := <-tick.C:
			l.out.Tick(now)
			if l.store != nil {
				l.store.Flush() // a follower (monarch logs -f) sees lines within a tick
			}
		case req := <-l.flushes:
			l.drain()
			l.out.Flush()
			if l.store != nil {
				l.store.Flush()
			}
			if req.then != nil {
				req.then()
			}
			close(req.ack)
		case <-ctx.Done():
			l.drain()
			l.out.Flush()
			if l.store != nil {
				l.store.Close()
			}
			return
		}
	}
}

func (l *clientLogs) drain() {
	l.mu.Lock()
	q := l.queue
	l.queue = nil
	l.mu.Unlock()
	now := time.Now()
	for _, line := range q {
		if l.store != nil {
			l.store.Write(line)
		}
		o, ok := l.opts[line.Proc] // written only on this goroutine (setOptions' then)
		if !ok {
			o = l.def
		}
		// The client program's own lines, which its launcher sends, are
		// on the terminal already.
		if o.StreamToClient && line.Proc != logagg.ClientProc {
			l.out.Print(line, o.AggregateWindow, now)
		}
	}
	l.out.Tick(now)
}

// StderrTail returns the last lines (at most MaxTail, each cut at 256
// bytes) that the proc at point pt of the mesh wrote to stderr, once every
// line it wrote has reached the client (FlushLogs), and forgets them: what
// a failed rank said last, for its failure report. The client keeps the
// tails of the procs that run and of those that failed, until asked; nil
// in a proc, which does not receive the job's lines.
func (p *ProcMesh) StderrTail(ctx context.Context, pt Point) []string {
	rt, err := p.runtime()
	if err != nil || rt.client() == nil {
		return nil
	}
	one := p.SliceAt(pt)
	if one.err != nil || one.reg.numRanks() != 1 {
		return nil
	}
	one.FlushLogs(ctx)
	return rt.client().logs.takeTail(one.procs[one.reg.baseRanks()[0]].ID)
}

// maxTails bounds the procs whose tails the client keeps at once.
const maxTails = 1 << 16

// takeTail returns the last lines proc wrote to stderr, oldest first, and
// forgets them.
func (l *clientLogs) takeTail(proc string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tails[proc]
	delete(l.tails, proc)
	return t.get()
}

// tailLine bounds each line a stderrTail keeps: with MaxTail lines, a
// proc's tail holds at most about 5 KiB, whatever it writes, so that
// thousands of ranks cost megabytes, not the 4 KiB lines they may write.
const tailLine = 256

// stderrTail is a ring of a proc's last MaxTail stderr lines.
type stderrTail struct {
	lines [MaxTail]string
	n     int // lines added
}

func (t *stderrTail) add(line string) {
	if t == nil {
		return
	}
	if len(line) > tailLine {
		line = strings.ToValidUTF8(line[:tailLine], "") + " …"
	}
	t.lines[t.n%MaxTail] = line
	t.n++
}

// get returns the lines kept, oldest first; nil for a nil tail.
func (t *stderrTail) get() []string {
	if t == nil || t.n == 0 {
		return nil
	}
	start := max(0, t.n-MaxTail)
	out := make([]string, 0, t.n-start)
	for i := start; i < t.n; i++ {
		out = append(out, t.lines[i%MaxTail])
	}
	return out
}
