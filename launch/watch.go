package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// jobWatch follows a job on its bus: which agents heartbeat, how many
// procs came up, for the progress display and for schedulers that pace
// their starts on it (awaitHosts, as agentSpec.awaitAgents); and the
// client's counts of what is up now, for the job's record.
type jobWatch struct {
	conn     *bus.Conn
	subjects jobenv.Subjects
	stop     context.CancelFunc

	mu    sync.Mutex
	hosts map[string]bool
	procs int
	more  chan struct{} // closed, and replaced, when another host reports
	// failed is what the client reported failed, if it did.
	failed *jobstate.Failure
}

// watchJob follows the job's hosts and procs as they come up, and what its
// client reports, on the bus; hostUp, if set, is called (from the
// watch's goroutine) each time another host is up.
func watchJob(srv *bus.Server, jobID string, prog *progress, st *jobstate.Writer, hostUp func()) (*jobWatch, error) {
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "launcher"})
	if err != nil {
		return nil, err
	}
	subj := jobenv.SubjectsOf(jobID)
	for _, s := range []string{subj.HeartbeatPrefix() + "*", subj.Up(), subj.Counts(), subj.Failure()} {
		if _, err := conn.Subscribe(s); err != nil {
			conn.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := newJobWatch(subj)
	w.conn, w.stop = conn, cancel
	hostsSeen := 0
	go conn.Run(ctx, func(m bus.Message) {
		switch m.Subject {
		case subj.Counts():
			recordCounts(st, m.Data)
			return
		case subj.Failure():
			w.takeFailure(m.Data)
			return
		}
		if hosts, procs, changed := w.saw(m.Subject); changed {
			prog.update(hosts, procs)
			// What came up, however briefly: the client's counts of
			// what is up now may never have shown it all.
			st.Update(func(r *jobstate.Record) { r.MaxHosts, r.MaxProcs = max(r.MaxHosts, hosts), max(r.MaxProcs, procs) })
			if hostUp != nil && hosts > hostsSeen {
				hostUp()
			}
			hostsSeen = hosts
		}
	})
	return w, nil
}

func newJobWatch(subj jobenv.Subjects) *jobWatch {
	return &jobWatch{subjects: subj, hosts: map[string]bool{}, more: make(chan struct{})}
}

// saw counts a heartbeat or an up message: a host agent's first
// heartbeat, or a proc up. It returns the counts, and whether they
// changed.
func (w *jobWatch) saw(subject string) (hosts, procs int, changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if agent, ok := strings.CutPrefix(subject, w.subjects.HeartbeatPrefix()); ok {
		// Procs heartbeat too once they start procs of their own.
		if w.hosts[agent] || !jobenv.IsAgentID(agent) {
			return len(w.hosts), w.procs, false
		}
		w.hosts[agent] = true
		close(w.more)
		w.more = make(chan struct{})
	} else {
		w.procs++
	}
	return len(w.hosts), w.procs, true
}

// takeFailure keeps the client's report of what failed; one that does
// not decode, or says nothing, is dropped.
func (w *jobWatch) takeFailure(data []byte) {
	var f jobstate.Failure
	if len(data) > maxFailure || json.Unmarshal(data, &f) != nil || f.Summary == "" {
		return
	}
	f.Summary = clip(f.Summary, 1024)
	if len(f.Tail) > jobstate.MaxTail {
		f.Tail = f.Tail[len(f.Tail)-jobstate.MaxTail:]
	}
	for i := range f.Tail {
		f.Tail[i] = clip(f.Tail[i], 4096)
	}
	w.mu.Lock()
	w.failed = &f
	w.mu.Unlock()
}

// maxFailure bounds a failure report: a summary and MaxTail lines.
const maxFailure = 128 << 10

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// failure is what the client reported failed; nil if nothing.
func (w *jobWatch) failure() *jobstate.Failure {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *jobWatch) hostsUp() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.hosts)
}

// awaitHosts waits until at least n host agents have reported, ctx ends
// or limit fires.
func (w *jobWatch) awaitHosts(ctx context.Context, n int, limit <-chan time.Time) {
	for {
		w.mu.Lock()
		up, more := len(w.hosts), w.more
		w.mu.Unlock()
		if up >= n {
			return
		}
		select {
		case <-more:
		case <-limit:
			return
		case <-ctx.Done():
			return
		}
	}
}

// agentGone says, on progress and to the client, that an agent's process
// ended while the job ran: the client hears it now rather than after the
// heartbeat timeout, and its supervision takes it from there.
func (w *jobWatch) agentGone(progress io.Writer, e agentEnd) {
	fmt.Fprintf(progress, "monarch: %s%s\n", e, e.said()) // what srun or ssh said below it
	for _, id := range e.agents {
		w.conn.Publish(w.subjects.AgentGone(id), []byte(e.String()))
	}
}

func (w *jobWatch) close() {
	w.stop()
	w.conn.Close()
}
