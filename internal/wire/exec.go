package wire

import (
	"errors"
	"fmt"
	"time"
)

// The ops of `monarch exec`: the job's client asks a host agent to run a
// command on its host (not a proc of the job: no bus, no secret, no
// rank), and the agent streams its output and then its end to the
// client's port.
const (
	// OpExec (ExecReq): a host agent runs a command; it sends ExecEvents
	// to the header's reply port: the command's output as it comes, then
	// one with End set, also when the command could not start.
	OpExec = "exec"
	// OpExecStop (ExecStopReq): a host agent stops a command of OpExec
	// (SIGTERM to its process group, SIGKILL after its grace); its end
	// follows on the port as usual.
	OpExecStop = "execstop"
)

// Bounds of an ExecReq.
const (
	// MaxExecArgs bounds the words of a command line.
	MaxExecArgs = 4096
	// MaxExecLine bounds a command line's bytes, its words together.
	MaxExecLine = 256 << 10
)

// ExecReq asks a host agent to run a command (OpExec).
type ExecReq struct {
	// ID names the command at its agent, for OpExecStop; unique among
	// those of the sender.
	ID   string   `msgpack:"id"`
	Argv []string `msgpack:"argv"` // the command and its arguments; the first looked up in $PATH
	// GraceMS is the time between a stop's SIGTERM and its SIGKILL, in
	// milliseconds (at most MaxStopGrace); 0: the agent's stop timeout.
	GraceMS int64 `msgpack:"grace,omitempty"`
	// TimeoutMS, when > 0, is how long the command may run before the
	// agent stops it, in milliseconds: a bound that holds even if the
	// client that asked is gone.
	TimeoutMS int64 `msgpack:"timeout,omitempty"`
}

// ExecStopReq asks a host agent to stop the command ID of the sender
// (OpExecStop). A command that has ended already is not an error.
type ExecStopReq struct {
	ID string `msgpack:"id"`
}

// ExecEvent is what a host agent sends about a command of OpExec: a
// piece of its output (Stream 1 stdout, 2 stderr), or its end (End set).
type ExecEvent struct {
	Stream uint8  `msgpack:"s,omitempty"`
	Data   []byte `msgpack:"d,omitempty"`
	End    bool   `msgpack:"end,omitempty"`
	// Status is, at the end, the command's exit status as a shell
	// reports it: its code, 128+n for signal n, 127 for a command not
	// found, 126 for one that cannot be run.
	Status int `msgpack:"status,omitempty"`
	// Reason says how it ended: "exited with status 3", "killed by
	// SIGTERM (stopped)", "cannot run nosuch: ...".
	Reason string `msgpack:"reason,omitempty"`
	// Dropped counts the bytes of output the agent did not send (past
	// its bound of output per command).
	Dropped int64 `msgpack:"dropped,omitempty"`
}

func (r *ExecReq) check() error {
	if !ValidID(r.ID) {
		return fmt.Errorf("exec id %.40q", r.ID)
	}
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return errors.New("empty command")
	}
	n := 0
	for _, a := range r.Argv {
		n += len(a)
	}
	if len(r.Argv) > MaxExecArgs || n > MaxExecLine {
		return fmt.Errorf("command of %d words, %d bytes (at most %d, %d)", len(r.Argv), n, MaxExecArgs, MaxExecLine)
	}
	if r.GraceMS < 0 || r.GraceMS > MaxStopGrace.Milliseconds() || r.TimeoutMS < 0 {
		return fmt.Errorf("grace %dms (at most %v), timeout %dms", r.GraceMS, MaxStopGrace, r.TimeoutMS)
	}
	return nil
}

func (r *ExecStopReq) check() error {
	if !ValidID(r.ID) {
		return fmt.Errorf("exec id %.40q", r.ID)
	}
	return nil
}

// Grace is the request's grace, or def when it gives none.
func (r *ExecReq) Grace(def time.Duration) time.Duration {
	if r.GraceMS > 0 {
		return time.Duration(r.GraceMS) * time.Millisecond
	}
	return def
}
