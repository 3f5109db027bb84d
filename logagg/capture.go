package logagg

import (
	"bufio"
	"errors"
	"io"
	"strconv"
)

// MaxLine is the longest line kept whole: a longer one is cut there and
// marked, so that one runaway line cannot hold up or blow up the path.
const MaxLine = 4 << 10

// Capture reads r to its end and calls emit with each line, without its
// newline, in order. A line longer than MaxLine is cut to MaxLine bytes
// followed by a marker saying how many bytes were dropped. A last line
// without a newline is emitted too. It returns nil at EOF.
func Capture(r io.Reader, emit func(text string)) error {
	br := bufio.NewReaderSize(r, MaxLine+1)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			emit(string(trimEOL(line)))
		case errors.Is(err, bufio.ErrBufferFull):
			head := string(line[:MaxLine])
			dropped := len(line) - MaxLine
			// Skip the rest of the line, counting it.
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				dropped += len(trimEOL(line))
			}
			emit(head + " …[cut: " + strconv.Itoa(dropped) + " more bytes]")
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if err != nil {
				return nil
			}
		case errors.Is(err, io.EOF):
			if len(line) > 0 {
				emit(string(line))
			}
			return nil
		default:
			if len(line) > 0 {
				emit(string(line))
			}
			return err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}
