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
// lines otherwise (a log, a CI run).
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	bar    *progressbar.ProgressBar
	nhosts int
	hosts  int
	procs  int
	start  time.Time
	last   time.Time
	ended  bool
}

func newProgress(w io.Writer, job, sched string, nhosts int) *progress {
	p := &progress{w: w, nhosts: nhosts, start: time.Now()}
	fmt.Fprintf(w, "monarch: job %s: %s, %d host(s)\n", job, sched, nhosts)
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
	if procs != p.procs {
		p.procs = procs
		if p.bar == nil && hosts < p.nhosts {
			return // hosts first: procs lines once they are all up
		}
		// Procs come in bursts: report at most every half second.
		if time.Since(p.last) > 500*time.Millisecond {
			p.last = time.Now()
			if p.bar != nil {
				p.bar.Describe(fmt.Sprintf("hosts up, %d procs", procs))
			} else {
				fmt.Fprintf(p.w, "monarch: procs up %d (%.1fs)\n", procs, time.Since(p.start).Seconds())
			}
		}
	}
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	if p.bar != nil {
		p.bar.Finish()
	}
	fmt.Fprintf(p.w, "monarch: job ended after %.1fs: %d/%d hosts and %d procs had come up\n", time.Since(p.start).Seconds(), p.hosts, p.nhosts, p.procs)
}
