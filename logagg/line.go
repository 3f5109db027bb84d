package logagg

import "time"

// Stream is which output of a proc a line came from.
type Stream uint8

const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "stream?"
}

// Line is one line a proc, or the job's client program, wrote.
type Line struct {
	Time time.Time
	Host string // host name
	Proc string // proc id, e.g. "c-3" or "h1-4"; ClientProc for the client's
	// Mesh is the name of the proc's proc mesh ("trainer"); "" in logs
	// written before meshes had names, and for the client's lines.
	Mesh   string
	Rank   int // the proc's rank in its proc mesh (row-major)
	Stream Stream
	Text   string // without the newline; already cut at 4 KiB by the capture
}

// ClientProc is the Proc of the lines the job's client program itself
// wrote (its stdout and stderr, which the launcher captures): they print
// as `[client] text`.
const ClientProc = "client"
