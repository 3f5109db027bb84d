package jobctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// OpExec runs a command on hosts of the job, through their host agents
// (`monarch exec`): an ExecRequest, streaming ExecEvents (the command's
// output) and answered by an ExecAnswer (how it ended on each host). A
// caller that asks it to end (see CallStream) stops the commands.
const OpExec = "exec"

// ExecRequest says what to run where.
type ExecRequest struct {
	// Hosts names the hosts to run on, as `monarch stacks --host` and the
	// log lines name them; All runs on every host of the job. One of them.
	Hosts []string `json:"hosts,omitempty"`
	All   bool     `json:"all,omitempty"`
	Argv  []string `json:"argv"` // the command and its arguments
	// Timeout, when > 0, bounds how long the commands may run: they are
	// then stopped, as by the caller.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Grace is the time between a stop's SIGTERM and its SIGKILL (0:
	// DefaultExecGrace).
	Grace time.Duration `json:"grace,omitempty"`
}

// DefaultExecGrace is a command's grace between SIGTERM and SIGKILL when
// it is stopped, unless the request says otherwise.
const DefaultExecGrace = 5 * time.Second

// ExecBound is the bound of an OpExec request with body: its timeout (or
// MaxOpTime), then its grace and a margin to stop the commands.
func ExecBound(body json.RawMessage) time.Duration {
	var r ExecRequest
	if json.Unmarshal(body, &r) != nil || r.Timeout <= 0 {
		return 0
	}
	return r.Timeout + ExecStopBound(r.Grace)
}

// ExecStopBound is how long stopping the commands may take, with grace
// between SIGTERM and SIGKILL: the grace, the wait for a killed process
// to be reaped and for its pipes, and a margin.
func ExecStopBound(grace time.Duration) time.Duration {
	if grace <= 0 {
		grace = DefaultExecGrace
	}
	return grace + 10*time.Second
}

// ExecEvent is a piece of a command's output on one host: bytes as the
// command wrote them, not cut at lines. Dropped, instead, counts bytes
// lost on the way (past a bound of output waiting to be sent).
type ExecEvent struct {
	Host    string `json:"host"`
	Stream  int    `json:"stream"` // 1 stdout, 2 stderr
	Data    []byte `json:"data,omitempty"`
	Dropped int64  `json:"dropped,omitempty"`
}

// ExecAnswer is how the command ended on each host, in the job's order of
// hosts.
type ExecAnswer struct {
	Job   string     `json:"job"`
	Hosts []ExecHost `json:"hosts"`
}

// ExecHost is how the command ended on one host.
type ExecHost struct {
	Host string `json:"host"`
	// Status is the exit status as a shell reports it (128+n for signal
	// n, 127 for a command not found); -1 when there is none: the host's
	// agent was lost, or did not answer.
	Status int `json:"status"`
	// Reason says how: "exited with status 3", "killed by SIGTERM
	// (stopped)", "cannot run nosuch on h1: ...", "no answer from ...".
	Reason string `json:"reason"`
	// Dropped counts the bytes of its output that were not shown.
	Dropped int64 `json:"dropped,omitempty"`
}

// ExitCode is the status `monarch exec` exits with: the highest of the
// hosts' statuses (0 when every one succeeded), and 1 for a host with
// none, unless another has a higher one.
func (a *ExecAnswer) ExitCode() int {
	code := 0
	for _, h := range a.Hosts {
		s := h.Status
		if s < 0 {
			s = 1
		}
		code = max(code, s)
	}
	return code
}

// PrintStatus prints how the command ended on each host, one line each
// ("[h1] exited with status 3"), then, when some failed, a line naming
// them.
func (a *ExecAnswer) PrintStatus(w io.Writer) {
	var failed []string
	for _, h := range a.Hosts {
		fmt.Fprintf(w, "[%s] %s\n", h.Host, h.Reason)
		if h.Dropped > 0 {
			fmt.Fprintf(w, "[%s] (%d bytes of its output were dropped)\n", h.Host, h.Dropped)
		}
		if h.Status != 0 {
			failed = append(failed, fmt.Sprintf("%s (%s)", h.Host, statusText(h.Status)))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "monarch exec: failed on %d of %d hosts: %s\n", len(failed), len(a.Hosts), strings.Join(failed, ", "))
	}
}

func statusText(s int) string {
	if s < 0 {
		return "no status"
	}
	return fmt.Sprintf("status %d", s)
}

// maxPartial bounds an unfinished line an ExecOutput holds: a longer one
// is written as it is, cut.
const maxPartial = 64 << 10

// ExecOutput writes the output of OpExec's events, each line prefixed by
// its host ("[h0] "), stdout's to Stdout and stderr's to Stderr. It holds
// a line until its end comes (up to maxPartial bytes), so that the lines
// of different hosts do not mix. It is not safe for concurrent use.
type ExecOutput struct {
	Stdout, Stderr io.Writer
	partial        map[execStream][]byte
	order          []execStream // of partial's keys, as they came
}

type execStream struct {
	host   string
	stream int
}

// Write writes the whole lines of ev.
func (o *ExecOutput) Write(ev ExecEvent) {
	k := execStream{ev.Host, ev.Stream}
	w := o.Stdout
	if ev.Stream == 2 {
		w = o.Stderr
	}
	if ev.Dropped > 0 {
		o.flush(k, w)
		fmt.Fprintf(o.Stderr, "[%s] (%d bytes of output dropped: they came faster than they were read)\n", ev.Host, ev.Dropped)
	}
	if o.partial == nil {
		o.partial = map[execStream][]byte{}
	}
	buf, seen := o.partial[k]
	if !seen {
		o.order = append(o.order, k)
	}
	buf = append(buf, ev.Data...)
	var out bytes.Buffer
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		out.WriteString("[" + ev.Host + "] ")
		out.Write(buf[:i+1])
		buf = buf[i+1:]
	}
	if len(buf) > maxPartial {
		out.WriteString("[" + ev.Host + "] ")
		out.Write(buf)
		out.WriteByte('\n')
		buf = nil
	}
	o.partial[k] = append([]byte(nil), buf...)
	w.Write(out.Bytes())
}

// Flush writes the unfinished lines, each ended by a newline.
func (o *ExecOutput) Flush() {
	for _, k := range o.order {
		w := o.Stdout
		if k.stream == 2 {
			w = o.Stderr
		}
		o.flush(k, w)
	}
}

func (o *ExecOutput) flush(k execStream, w io.Writer) {
	if buf := o.partial[k]; len(buf) > 0 {
		fmt.Fprintf(w, "[%s] %s\n", k.host, buf)
		o.partial[k] = nil
	}
}
