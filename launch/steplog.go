package launch

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/monarch-go/monarch/logagg"
	"github.com/rs/zerolog"
)

// stepLog takes the stderr of a process that holds host agents: the
// agents' srun step, or one ssh session. What the scheduler's own tools
// say (own: srun's and slurmstepd's lines, ssh's) is not the user's to
// read while all goes well: tearing a step down alone makes srun print
// half a dozen "error" and "Killed" lines. Those lines go to the job's
// system log (role launcherLogRole), and are kept, bounded, for the
// message that reports the process's end if it fails (see stepCause).
// Every other line is the agents' own (their warnings, their errors) and
// goes on to pass as it comes. It is safe for concurrent use.
type stepLog struct {
	from string            // the process, in the system log: "srun", "ssh h2"
	own  func(string) bool // the scheduler's own lines
	// onOwn, when set, is given each of them as it comes (s.mu held:
	// it must not block).
	onOwn func(string)
	pass  io.Writer       // the agents' own lines: the launcher's stderr
	sys   *zerolog.Logger // the system log; nil: none
	path  string          // the system log's file, for messages

	mu    sync.Mutex
	lines boundedLines // every line, the agents' included: causes are in both
	part  []byte
}

// launcherLogRole is the role of the launcher's own system log
// (/tmp/$USER/monarch_<job>_launcher.log): what the processes it starts
// to hold the host agents (srun, ssh) say of themselves goes there, not
// to the user's terminal.
const launcherLogRole = "launcher"

// Bounds of what a stepLog keeps in memory: its first and last
// stepLogKeep lines, each cut to maxLineLen bytes; a line not ended
// within maxLineLen is taken as it is.
const (
	stepLogKeep = 64
	maxLineLen  = 1024
)

func (s *stepLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.part = append(s.part, p...)
	for {
		i := bytes.IndexByte(s.part, '\n')
		if i < 0 && len(s.part) <= maxLineLen {
			break
		}
		if i < 0 {
			i = maxLineLen
			s.line(string(s.part[:i]))
			s.part = s.part[i:]
			continue
		}
		s.line(string(s.part[:i]))
		s.part = s.part[i+1:]
	}
	if len(s.part) == 0 {
		s.part = nil // let a long-gone burst's buffer go
	}
	return len(p), nil
}

// line takes one line: kept, and logged or passed on. s.mu is held.
func (s *stepLog) line(l string) {
	l = strings.TrimRight(l, "\r")
	if strings.TrimSpace(l) == "" {
		return
	}
	if len(l) > maxLineLen {
		l = l[:maxLineLen]
	}
	own := s.own != nil && s.own(l)
	s.lines.add(l, own)
	if own && s.onOwn != nil {
		s.onOwn(l)
	}
	switch {
	case !own && s.pass != nil:
		io.WriteString(s.pass, l+"\n")
	case own && s.sys != nil:
		s.sys.Info().Str("from", s.from).Msg(l)
	}
}

// flush takes a last line not ended by a newline.
func (s *stepLog) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.part) > 0 {
		s.line(string(s.part))
		s.part = nil
	}
}

// said returns the lines kept, in order, and how many were left out
// between the first and the last ones kept.
func (s *stepLog) said() ([]keptLine, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines.all(), s.lines.dropped
}

// keptLine is a line of a stepLog; own says it is the scheduler's own
// (it went to the system log, not to the terminal).
type keptLine struct {
	text string
	own  bool
}

// boundedLines keeps the first and the last stepLogKeep lines added, and
// counts the others.
type boundedLines struct {
	head, tail []keptLine
	next       int // where the next line goes in tail, once it is full
	dropped    int
}

func (b *boundedLines) add(text string, own bool) {
	l := keptLine{text, own}
	switch {
	case len(b.head) < stepLogKeep:
		b.head = append(b.head, l)
	case len(b.tail) < stepLogKeep:
		b.tail = append(b.tail, l)
	default:
		b.tail[b.next] = l
		b.next = (b.next + 1) % stepLogKeep
		b.dropped++
	}
}

// all is the lines kept, in the order they came.
func (b *boundedLines) all() []keptLine {
	out := make([]keptLine, 0, len(b.head)+len(b.tail))
	out = append(out, b.head...)
	out = append(out, b.tail[b.next:]...)
	return append(out, b.tail[:b.next]...)
}

// stepLog returns a stepLog for the process from (srun, ssh HOST) of job:
// own tells its own lines, which go to the job's launcher system log
// (opened once for a, closed by stop), the others to pass. Without a
// system log (its folder refused) they are kept in memory only.
func (a *agents) stepLog(job, from string, own func(string) bool, pass io.Writer) *stepLog {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.sysTried {
		a.sysTried = true
		if l, c, err := logagg.SystemLogger(job, launcherLogRole); err == nil {
			a.sys, a.closer, a.sysPath = &l, c, logagg.SystemLogPath(logagg.SystemLogDir(), job, launcherLogRole)
		}
	}
	return &stepLog{from: from, own: own, pass: pass, sys: a.sys, path: a.sysPath}
}
