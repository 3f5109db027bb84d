package logagg

import (
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// ColorFor reports whether lines written to f should be colored: only
// when f is a terminal, NO_COLOR is unset or empty (https://no-color.org:
// any non-empty value turns colors off) and TERM is not "dumb". It is the
// one rule for every printer of proc output: the client's live output and
// `monarch logs`.
func ColorFor(f *os.File) bool {
	if f == nil || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fd := f.Fd()
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}

// colorWriter is ColorFor for a writer: one that is not a file, such as a
// buffer, gets no color.
func colorWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && ColorFor(f)
}
