package jobstate

import (
	"sync"
	"time"
)

// MinInterval is the least time between two writes of a running job's
// record by a Writer.
const MinInterval = 250 * time.Millisecond

// Writer keeps one job's record in the store while the job runs. Update
// changes the record and has it written soon, never more often than every
// MinInterval and never losing the last change; Finish writes the end.
// The writes happen on a timer goroutine, so Update never waits for the
// disk. Writer is safe for concurrent use.
type Writer struct {
	dir string

	mu      sync.Mutex
	rec     Record
	last    time.Time // of the last write
	timer   *time.Timer
	pending bool
	done    bool
	err     error // of the last write
}

// NewWriter writes rec to dir now and returns a Writer that keeps it.
func NewWriter(dir string, rec Record) (*Writer, error) {
	w := &Writer{dir: dir, rec: rec}
	w.rec.peak()
	if err := Save(dir, &w.rec); err != nil {
		return nil, err
	}
	w.last = time.Now()
	return w, nil
}

// Job is the record's job id.
func (w *Writer) Job() string { return w.rec.Job }

// Update applies fn to the record and schedules a write. fn runs under the
// Writer's lock: it must not block. Updates after Finish are ignored.
func (w *Writer) Update(fn func(*Record)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	fn(&w.rec)
	w.rec.peak()
	if w.pending {
		return // the scheduled write takes this change too
	}
	w.pending = true
	wait := max(0, MinInterval-time.Since(w.last))
	if w.timer == nil {
		w.timer = time.AfterFunc(wait, w.flush)
	} else {
		w.timer.Reset(wait)
	}
}

// flush writes the record as it is now (on the timer's goroutine).
func (w *Writer) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || !w.pending {
		return
	}
	w.pending = false
	w.err = Save(w.dir, &w.rec)
	w.last = time.Now()
}

// Finish applies fn (which sets the end state), writes the record now and
// stops the Writer. Later calls do nothing and return nil.
func (w *Writer) Finish(fn func(*Record)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	fn(&w.rec)
	w.rec.peak()
	if w.rec.Ended.IsZero() {
		w.rec.Ended = time.Now()
	}
	return Save(w.dir, &w.rec)
}

// Err returns the error of the last scheduled write, if it failed.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (r *Record) peak() {
	r.MaxHosts = max(r.MaxHosts, r.Hosts)
	r.MaxProcs = max(r.MaxProcs, r.Procs)
}
