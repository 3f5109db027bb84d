package launch

import (
	"os"
	"os/exec"
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
// not recorded twice.

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
	buf     []byte
}

func newClientOutput(to *os.File, stream logagg.Stream, bus publisher, job string) *clientOutput {
	host, _ := os.Hostname()
	return &clientOutput{to: to, stream: stream, subject: jobenv.SubjectsOf(job).Log(), bus: bus, host: host}
}

// Write passes b on, then publishes each line it ends. A line longer
// than logagg.MaxLine is published in pieces of that size.
func (o *clientOutput) Write(b []byte) (int, error) {
	n := len(b)
	o.to.Write(b) // the terminal's trouble is not the client's
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' && len(o.partial)+i < logagg.MaxLine {
			i++
		}
		o.partial = append(o.partial, b[:i]...)
		if i == len(b) {
			break // the line goes on in the next write
		}
		if b[i] == '\n' {
			i++
		}
		o.publish(trimCR(o.partial))
		o.partial = o.partial[:0]
		b = b[i:]
	}
	return n, nil
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
