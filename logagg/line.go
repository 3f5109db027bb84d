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

// Line is one line a proc wrote.
type Line struct {
	Time   time.Time
	Host   string // host name
	Proc   string // proc id, e.g. "c-3" or "h1-4"
	Rank   int    // the proc's rank in its proc mesh (row-major)
	Stream Stream
	Text   string // without the newline; already cut at 4 KiB by the capture
}
