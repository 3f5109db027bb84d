package launch

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// progress shows hosts and procs coming up: a bar on a terminal, plain
// lines otherwise (a log, a CI run). "procs up N" counts the procs the
// job's program spawned that came up (its client, which the launcher
// starts, is not one), as the job's record (`monarch status`, PROCS)
// counts them; the last count shown is the true one, before the job's
// end line.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	bar    *progressbar.ProgressBar
	nhosts int
	hosts  int
	procs  int
	shown  int // the procs count printed last
	start  time.Time
	last   time.Time
	ended  bool
	// late prints the procs count a burst left unprinted.
	late *time.Timer
	job  string
}

// newProgress starts the display of job (in batch, "Slurm job 8", if
// any) on nhosts hosts of scheduler sched.
func newProgress(w io.Writer, job, batch, sched string, nhosts int) *progress {
	p := &progress{w: w, nhosts: nhosts, start: time.Now(), job: job}
	if batch != "" {
		batch = " (" + batch + ")"
	}
	fmt.Fprintf(w, "monarch: job %s%s: %s, %d host(s)\n", job, batch, sched, nhosts)
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		p.bar = progressbar.NewOptions(nhosts, progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("hosts up"), progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *progress) update(hosts, procs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if hosts != p.hosts {
		p.hosts = hosts
		if p.bar != nil {
			p.bar.Set(hosts)
		} else {
			fmt.Fprintf(p.w, "monarch: hosts up %d/%d (%.1fs)\n", hosts, p.nhosts, time.Since(p.start).Seconds())
		}
	}
	p.procs = procs
	if p.procs != p.shown {
		if p.bar == nil && hosts < p.nhosts {
			return // hosts first: procs lines once they are all up
		}
		// Procs come in bursts: report at most every half second, and
		// the last count of a burst too.
		if wait := 500*time.Millisecond - time.Since(p.last); wait > 0 {
			if p.late == nil {
				p.late = time.AfterFunc(wait, p.printLate)
			}
			return
		}
		p.printProcs()
	}
}

func (p *progress) printLate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.late = nil
	if !p.ended && p.procs != p.shown {
		p.printProcs()
	}
}

func (p *progress) printProcs() {
	p.last, p.shown = time.Now(), p.procs
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("hosts up, %d procs", p.procs))
	} else {
		fmt.Fprintf(p.w, "monarch: procs up %d (%.1fs)\n", p.procs, time.Since(p.start).Seconds())
	}
}

// done ends the display with how the job ended: its last line.
func (p *progress) done(end string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	if p.late != nil {
		p.late.Stop()
	}
	if p.procs != p.shown && p.bar == nil {
		p.printProcs() // the count a burst left unprinted
	}
	if p.bar != nil {
		p.bar.Finish()
	}
	fmt.Fprintf(p.w, "monarch: job %s ended: %s (after %.1fs; %d/%d hosts and %d procs had come up)\n",
		p.job, end, time.Since(p.start).Seconds(), p.hosts, p.nhosts, p.procs)
}
