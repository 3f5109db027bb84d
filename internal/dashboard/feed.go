package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// keepAlive is how often an event stream with nothing new says so (a
// comment line), so that a browser that went away is noticed.
const keepAlive = 15 * time.Second

// writeWait bounds each write of an event stream.
const writeWait = 10 * time.Second

// state asks the job for a snapshot, bounded by StateTimeout.
func (s *Server) state(ctx context.Context) (*jobctl.JobState, error) {
	ctx, cancel := context.WithTimeout(ctx, StateTimeout)
	defer cancel()
	st, err := s.o.Job.State(ctx)
	if err == nil && st == nil {
		err = fmt.Errorf("no state")
	}
	return st, err
}

func (s *Server) serveState(w http.ResponseWriter, r *http.Request) {
	st, err := s.state(r.Context())
	if err != nil {
		http.Error(w, "monarch: the job's state: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, st)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "monarch: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

// serveEvents streams the job's state (see the package doc): each event
// is "data: <JobState JSON>"; an "event: problem" tells that the state
// could not be had (its data a JSON string saying why).
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !slot(w, s.streams, "event streams") {
		return
	}
	defer func() { <-s.streams }()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	ctx := r.Context()
	send := func(text []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(writeWait))
		if _, err := w.Write(text); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send([]byte("retry: 2000\n\n")) {
		return
	}
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	var last []byte
	quiet := time.Now()
	for {
		var ev []byte
		st, err := s.state(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			msg, _ := json.Marshal(err.Error())
			ev = fmt.Appendf(nil, "event: problem\ndata: %s\n\n", msg)
			last = nil
		default:
			at := st.At
			st.At = time.Time{}
			same, _ := json.Marshal(st) // without At: what changed
			if !bytes.Equal(same, last) {
				last = same
				st.At = at
				b, err := json.Marshal(st)
				if err != nil {
					return
				}
				ev = append(append([]byte("data: "), b...), "\n\n"...)
			}
		}
		if ev == nil && time.Since(quiet) >= keepAlive {
			ev = []byte(": nothing new\n\n")
		}
		if ev != nil {
			if !send(ev) {
				return
			}
			quiet = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
