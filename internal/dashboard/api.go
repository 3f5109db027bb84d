package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/logagg"
)

// serveStacks answers /api/stacks: ?proc=ID, the proc of that id (the
// page asks for a member's); or ?mesh=M&rank=R, repeatable, as
// `monarch stacks --mesh M --rank R`; nothing: every proc and the client.
func (s *Server) serveStacks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sel := jobctl.Selection{Meshes: q["mesh"], Hosts: q["host"]}
	ranks, err := intsOf(q, "rank")
	if err != nil {
		badRequest(w, err)
		return
	}
	sel.Ranks = ranks
	if !slot(w, s.heavy, "stack and log requests") {
		return
	}
	defer func() { <-s.heavy }()
	if proc := q.Get("proc"); proc != "" {
		st, err := s.state(r.Context())
		if err != nil {
			http.Error(w, "monarch: the job's state: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		mesh, rank, ok := procOf(st, proc)
		if !ok {
			http.Error(w, fmt.Sprintf("monarch: job %s has no proc %q in its proc meshes", st.Job, proc), http.StatusNotFound)
			return
		}
		sel = jobctl.Selection{Meshes: []string{mesh}, Ranks: []int{rank}}
	}
	ctx, cancel := context.WithTimeout(r.Context(), StacksTimeout+5*time.Second)
	defer cancel()
	ans, err := s.o.Job.Stacks(ctx, jobctl.StacksRequest{Selection: sel, Timeout: StacksTimeout})
	if err != nil {
		badRequest(w, err) // a selection the job does not have, mostly
		return
	}
	var b bytes.Buffer
	jobctl.Format(&b, ans, time.Now())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

// procOf finds proc in st's proc meshes: its mesh's name and its rank.
func procOf(st *jobctl.JobState, proc string) (string, int, bool) {
	for _, pm := range st.ProcMeshes {
		for _, p := range pm.Procs {
			if p.Proc == proc {
				return pm.Name, p.Rank, true
			}
		}
	}
	return "", 0, false
}

// logLine is a line of /api/logs.
type logLine struct {
	At     time.Time `json:"at"`
	Host   string    `json:"host"`
	Proc   string    `json:"proc"`
	Mesh   string    `json:"mesh,omitempty"`
	Rank   int       `json:"rank"` // -1 for the client program's lines
	Stream string    `json:"stream"`
	Text   string    `json:"text"`
}

// logsAnswer is /api/logs' answer: the last lines that matched, oldest
// first, and how many matched in all.
type logsAnswer struct {
	Lines   []logLine `json:"lines"`
	Matched int64     `json:"matched"`
	// Partial says the read stopped before the log's end (LogsTimeout).
	Partial bool `json:"partial,omitempty"`
}

// serveLogs answers /api/logs (see the package doc).
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	f, n, err := logsQuery(r.URL.Query(), time.Now())
	if err != nil {
		badRequest(w, err)
		return
	}
	if !slot(w, s.heavy, "stack and log requests") {
		return
	}
	defer func() { <-s.heavy }()
	ctx, cancel := context.WithTimeout(r.Context(), LogsTimeout)
	defer cancel()
	ring := make([]logLine, n)
	var ans logsAnswer
	err = s.o.Job.Logs(ctx, f, func(l logagg.Line) error {
		ll := logLine{At: l.Time, Host: l.Host, Proc: l.Proc, Mesh: l.Mesh, Rank: l.Rank, Stream: l.Stream.String(), Text: l.Text}
		if l.Proc == logagg.ClientProc {
			ll.Rank = -1
		}
		ring[ans.Matched%int64(n)] = ll
		ans.Matched++
		return nil
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		ans.Partial = true
	case errors.Is(err, logagg.ErrCorrupt): // the rest was read
	case errors.Is(err, logagg.ErrNoJob):
		// No line yet: nothing written.
	case err != nil:
		http.Error(w, "monarch: the job's log: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	kept := min(ans.Matched, int64(n))
	ans.Lines = make([]logLine, 0, kept)
	for i := ans.Matched - kept; i < ans.Matched; i++ {
		ans.Lines = append(ans.Lines, ring[i%int64(n)])
	}
	writeJSON(w, ans)
}

// logsQuery reads /api/logs' query: the filters of `monarch logs`
// (host, mesh and rank repeatable; stream; grep, a Go regexp; since, a
// duration back from now or an RFC3339 time) and n, the lines wanted.
func logsQuery(q url.Values, now time.Time) (logagg.Filter, int, error) {
	f := logagg.Filter{Hosts: nonEmpty(q["host"]), Meshes: nonEmpty(q["mesh"])}
	var err error
	if f.Ranks, err = intsOf(q, "rank"); err != nil {
		return f, 0, err
	}
	if f.Stream, err = logagg.ParseStream(q.Get("stream")); err != nil {
		return f, 0, fmt.Errorf("stream %q: %w", q.Get("stream"), err)
	}
	if g := q.Get("grep"); g != "" {
		if f.Grep, err = regexp.Compile(g); err != nil {
			return f, 0, fmt.Errorf("grep: %w", err)
		}
	}
	if v := q.Get("since"); v != "" {
		if f.Since, err = logagg.ParseSince(v, now); err != nil {
			return f, 0, fmt.Errorf("since %q: %w", v, err)
		}
	}
	n := DefaultLogLines
	if v := q.Get("n"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > MaxLogLines {
			return f, 0, fmt.Errorf("n %q: want a number of lines from 1 to %d", v, MaxLogLines)
		}
	}
	return f, n, nil
}

// intsOf reads the numbers of q's key k; empty values are left out.
func intsOf(q url.Values, k string) ([]int, error) {
	var out []int
	for _, v := range nonEmpty(q[k]) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s %q: want a rank, 0 or more", k, v)
		}
		out = append(out, n)
	}
	return out, nil
}

// nonEmpty is vs without its empty strings (a form's empty fields).
func nonEmpty(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func badRequest(w http.ResponseWriter, err error) {
	http.Error(w, "monarch: "+err.Error(), http.StatusBadRequest)
}
