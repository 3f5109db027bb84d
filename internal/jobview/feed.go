package jobview

import (
	"context"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// FiguresEvery is the least time between two rounds of asking the procs
// for their figures.
const FiguresEvery = 500 * time.Millisecond

// feed is the model under its lock, and the asking for figures: at most
// one round at a time, at most every FiguresEvery, so that nothing is
// sent while nobody looks.
type feed struct {
	mu sync.Mutex
	m  *Model

	asking  sync.Mutex // one round of asking at a time
	askedAt time.Time  // under asking
}

// step runs fn on the model, under its lock.
func (f *feed) step(fn func(*Model)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.m)
}

// refresh asks the procs for their figures, unless that was done less
// than FiguresEvery ago, waiting at most timeout; a proc that does not
// answer keeps what it said last.
func (f *feed) refresh(ctx context.Context, job Job, own string, timeout time.Duration) {
	f.asking.Lock()
	defer f.asking.Unlock()
	if time.Since(f.askedAt) < FiguresEvery {
		return
	}
	procs := procsOf(job.Live())
	infos := make([]jobctl.ProcInfo, len(procs))
	round := make([]Answer, len(procs)+1)
	askEach(ctx, procs, infos, timeout, "figures", "late", func(ctx context.Context, i int, p proc) error {
		fig, err := job.Figures(ctx, p.id)
		if err == nil {
			round[i+1] = Answer{Proc: p.id, Figures: &fig, At: time.Now()}
		} else {
			round[i+1] = Answer{Proc: p.id}
		}
		return err
	})
	for i, p := range procs {
		round[i+1].Proc = p.id // a command proc is not asked
	}
	fig, _ := job.Figures(ctx, "") // the client's, as a proc's
	round[0] = Answer{Proc: own, Figures: &fig, At: time.Now()}
	f.askedAt = time.Now()
	f.step(func(m *Model) { m.FiguresAnswered(round) })
}

// snapshot is the job's state now.
func (f *feed) snapshot(job Job) *jobctl.JobState {
	l := job.Live()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Snapshot(l)
}
