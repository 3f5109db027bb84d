package launch

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/logagg"
)

// The client program's own output. The launcher starts the client with
// its stdout and stderr on pipes it reads: every byte goes on to the
// launcher's own stdout and stderr as it comes (the terminal sees the
// program as before), and every line is published on the job's log
// subject as a line of the client (logagg.ClientProc), as a host agent
// publishes a proc's, so that the client's log writer records it and
// `monarch logs` shows it as [client] text. The client prints its procs'
// lines to the launcher's stdout and stderr directly, passed to it as
// extra files (jobenv.OutputVar): those are not the program's, and are
// not recorded twice. The client's last line on each, jobenv.OutputEnd,
// is published but not passed on: when it comes back to the client, the
// client knows its program's lines are all in the log.

// publisher sends a message on the job's bus.
type publisher interface {
	Publish(subject string, data []byte) error
}

// clientOutput is an io.Writer for one output of the client: exec.Cmd
// copies the pipe into it, and its Wait waits for the copy (bounded by
// Cmd.WaitDelay), so that the client's output is all written before the
// launcher's last line.
type clientOutput struct {
	to      *os.File
	stream  logagg.Stream
	subject string
	bus     publisher
	host    string

	mu      sync.Mutex
	partial []byte // the start of a line not ended yet
	holding bool   // partial is not passed on yet: it may be the end line
	buf     []byte
}

func newClientOutput(to *os.File, stream logagg.Stream, bus publisher, job string) *clientOutput {
	host, _ := os.Hostname()
	return &clientOutput{to: to, stream: stream, subject: jobenv.SubjectsOf(job).Log(), bus: bus, host: host}
}

// Write passes b on, then publishes each line it ends. A line longer
// than logagg.MaxLine is published in pieces of that size. The client's
// end line (jobenv.OutputEnd) is published but not passed on: a line
// that begins as it does is held back until it is whole or differs.
func (o *clientOutput) Write(b []byte) (int, error) {
	n := len(b)
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(b) > 0 {
		piece := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			piece = b[:i+1]
		}
		b = b[len(piece):]
		o.take(piece)
	}
	return n, nil
}

// take handles a piece of one line: all of it, or its end with the
// newline.
func (o *clientOutput) take(piece []byte) {
	text, ended := bytes.CutSuffix(piece, []byte("\n"))
	held := len(o.partial) // bytes of this line not passed on yet, if holding
	o.partial = append(o.partial, text...)
	if strings.HasPrefix(jobenv.OutputEnd, string(o.partial)) {
		switch {
		case ended && string(o.partial) == jobenv.OutputEnd:
			o.publish(o.partial)
			o.partial, o.holding = o.partial[:0], false
			return
		case !ended:
			o.holding = true
			return
		}
	}
	if o.holding {
		o.to.Write(o.partial[:held]) // it was not the end line after all
		o.holding = false
	}
	o.to.Write(piece) // the terminal's trouble is not the client's
	for len(o.partial) > logagg.MaxLine || !ended && len(o.partial) == logagg.MaxLine {
		o.publish(o.partial[:logagg.MaxLine])
		o.partial = append(o.partial[:0], o.partial[logagg.MaxLine:]...)
	}
	if ended {
		o.publish(trimCR(o.partial))
		o.partial = o.partial[:0]
	}
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

func (o *clientOutput) publish(text []byte) {
	o.buf = logagg.AppendLine(o.buf[:0], logagg.Line{Time: time.Now(), Host: o.host, Proc: logagg.ClientProc, Rank: 0,
		Stream: o.stream, Text: string(text)})
	o.bus.Publish(o.subject, o.buf)
}

// captureClientOutput sets cmd up so that the client's own output is
// recorded (see above), when the launcher's stdout and stderr are files
// the client can be given; otherwise the client writes to them as it
// is.
func captureClientOutput(cmd *exec.Cmd, stdout, stderr any, bus publisher, job string) {
	out, ok1 := stdout.(*os.File)
	errf, ok2 := stderr.(*os.File)
	if !ok1 || !ok2 || bus == nil {
		return
	}
	cmd.Env = append(cmd.Env, jobenv.OutputVar+"="+jobenv.OutputFDs)
	cmd.ExtraFiles = []*os.File{out, errf} // fds 3 and 4, as OutputFDs says
	cmd.Stdout = newClientOutput(out, logagg.Stdout, bus, job)
	cmd.Stderr = newClientOutput(errf, logagg.Stderr, bus, job)
	// A process the client started that keeps the pipes open does not
	// hold up the launcher past this.
	cmd.WaitDelay = time.Second
}
