package hostsconfig

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Limits. A hosts or job file is a few dozen keys; the TOML library's
// cost grows with the square of nesting depth (each nested table copies
// its whole key path, several times), so 5 KB of nested inline tables
// cost it 120 MB and 120 KB cost more than any machine has; and a syntax
// error costs it 16 bytes for each line of the file. Every file is
// therefore read with a size limit and scanned once, in linear time and
// without allocating, for the other limits before the library sees it:
// a file within them costs under 8 MB to decode and check (see
// TestLimitsAllow).
const (
	// MaxFileSize is the largest configuration file, in bytes, that the
	// Load functions read.
	MaxFileSize = 1 << 20

	// maxLines bounds the lines (the library splits the whole file into
	// lines to report a syntax error's column).
	maxLines = 10000
	// maxDepth bounds nesting: tables, dotted key parts, arrays and
	// inline tables each add a level (hosts.ssh.hosts[0] is 4 deep).
	maxDepth = 10
	// maxKeys bounds the keys written, counting each part of a dotted
	// key and of a table header ([[servers]] twice is 2).
	maxKeys = 2000
	// maxValues bounds the values, counting each element of an array.
	maxValues = 5000
	// maxTokenLen bounds each key part and each unquoted value (number,
	// date, boolean), in bytes; strings may be as long as the file.
	maxTokenLen = 128
)

var (
	errLines   = fmt.Errorf("more than %d lines", maxLines)
	errTooDeep = fmt.Errorf("nested more than %d levels deep (tables, dotted keys, arrays and inline tables)", maxDepth)
	errKeys    = fmt.Errorf("more than %d keys", maxKeys)
	errValues  = fmt.Errorf("more than %d values", maxValues)
	errKeyLen  = fmt.Errorf("key longer than %d bytes", maxTokenLen)
	errBareLen = fmt.Errorf("unquoted value longer than %d bytes", maxTokenLen)
	errSize    = fmt.Errorf("larger than %d MiB", MaxFileSize>>20)
)

// limitMsg is how every limit's message ends.
const limitMsg = ", the limit for a configuration file"

// readLimited reads the file at path, refusing one over MaxFileSize
// without reading more than MaxFileSize+1 bytes of it (a regular file
// whose size says so, not at all).
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := 512 // unknown: grown as it is read
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > MaxFileSize {
			return nil, errSize
		}
		size = int(fi.Size()) + 1 // one more, to see the end
	}
	r := io.LimitReader(f, MaxFileSize+1)
	data := make([]byte, 0, size)
	for {
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) { // double, up to the one byte over the limit
			data = slices.Grow(data, min(cap(data), MaxFileSize+1-cap(data)))
		}
	}
	if len(data) > MaxFileSize {
		return nil, errSize
	}
	return data, nil
}

// limitError is a limit a file goes over, at a line.
type limitError struct {
	line int
	err  error
}

// checkLimits scans src once and returns the first limit it goes over,
// or nil. It follows TOML closely enough to count exactly on valid TOML
// (strings, comments, keys, tables, arrays, inline tables); on invalid
// TOML it keeps counting whatever it can make of the bytes, so it never
// counts less than the library would parse before its syntax error.
func checkLimits(src string) *limitError {
	if strings.Count(src, "\n") > maxLines { // a last line may follow the last newline
		return &limitError{line: maxLines + 1, err: errLines}
	}
	s := &limitScanner{scanner: scanner{src: src, line: 1}}
	if err := s.document(); err != nil {
		return &limitError{line: s.errLine, err: err}
	}
	return nil
}

// limitScanner is the state of checkLimits. The nesting within one value
// is a stack of at most maxDepth frames, held in place.
type limitScanner struct {
	scanner
	errLine int // line of the limit gone over

	keys, values int
	frames       [maxDepth]frame
	nframes      int
}

// frame is an array or inline table being read, at depth levels.
type frame struct {
	inline bool
	depth  int
}

func (s *limitScanner) fail(err error) error {
	s.errLine = s.line
	return err
}

func (s *limitScanner) document() error {
	tableDepth := 0
	for {
		s.skip(true)
		if s.i >= len(s.src) {
			return nil
		}
		if s.peek() == '[' { // [table] or [[array of tables]]
			s.i++
			if s.peek() == '[' {
				s.i++
			}
			n, err := s.key(0)
			if err != nil {
				return err
			}
			tableDepth = n
		} else if err := s.keyValue(tableDepth); err != nil {
			return err
		}
		if err := s.restOfLine(); err != nil {
			return err
		}
	}
}

// keyValue reads `key = value` at the top level, below a table depth deep.
func (s *limitScanner) keyValue(depth int) error {
	n, err := s.key(depth)
	if err != nil {
		return err
	}
	if n == 0 {
		s.i++ // not a key: the parser will say what it is
		return nil
	}
	s.skip(false)
	if s.peek() != '=' {
		return nil
	}
	s.i++
	return s.value(depth + n)
}

// value reads one value at depth levels, arrays and inline tables
// included, and stops at the end of its line or of the input.
func (s *limitScanner) value(depth int) error {
	const (
		wantValue = iota // a value, or the end of an array
		wantKey          // a key of an inline table, or its end
		after            // after a value: a comma, or the end of an array or inline table
	)
	state := wantValue
	for {
		s.skip(s.nframes > 0) // newlines are blanks inside brackets
		c := s.peek()
		if s.i >= len(s.src) || c == '\n' {
			return nil
		}
		var top *frame
		if s.nframes > 0 {
			top = &s.frames[s.nframes-1]
		}
		switch state {
		case wantValue:
			if top != nil && (!top.inline && c == ']' || top.inline && c == '}') { // [], a trailing comma
				s.i++
				s.nframes--
				state = after
				continue
			}
			if depth > maxDepth {
				return s.fail(errTooDeep)
			}
			if s.values++; s.values > maxValues {
				return s.fail(errValues)
			}
			switch c {
			case '[', '{':
				if s.nframes == len(s.frames) { // only with depth > maxDepth, checked above
					return s.fail(errTooDeep)
				}
				s.i++
				s.frames[s.nframes] = frame{inline: c == '{', depth: depth}
				s.nframes++
				if c == '[' {
					depth++
				} else {
					state = wantKey
				}
				continue
			}
			if err := s.scalar(); err != nil {
				return err
			}
			state = after
		case wantKey:
			switch c {
			case '}':
				s.i++
				s.nframes--
				state = after
				continue
			case ',':
				s.i++
				continue
			}
			n, err := s.key(top.depth)
			if err != nil {
				return err
			}
			if n == 0 {
				s.i++
				continue
			}
			s.skip(false)
			if s.peek() == '=' {
				s.i++
			}
			depth, state = top.depth+n, wantValue
		case after:
			switch {
			case c == ',' && top != nil:
				s.i++
				if top.inline {
					state = wantKey
				} else {
					depth, state = top.depth+1, wantValue
				}
			case c == ']' && top != nil && !top.inline, c == '}' && top != nil && top.inline:
				s.i++
				s.nframes--
			default: // more of a value ("1979-05-27 07:32:00") or not TOML
				if err := s.scalar(); err != nil {
					return err
				}
			}
		}
	}
}

// restOfLine moves past what follows a header or a value on its line:
// blanks and a comment in valid TOML.
func (s *limitScanner) restOfLine() error {
	s.nframes = 0
	for {
		s.skip(false)
		if s.i >= len(s.src) || s.peek() == '\n' {
			return nil
		}
		if err := s.scalar(); err != nil {
			return err
		}
	}
}

// scalar moves past a string or an unquoted value, or failing that one
// byte.
func (s *limitScanner) scalar() error {
	switch s.peek() {
	case '"', '\'':
		s.str()
		return nil
	}
	if n := s.bare(false); n > maxTokenLen {
		return s.fail(errBareLen)
	} else if n == 0 {
		s.i++
	}
	return nil
}

// key reads a possibly dotted key below depth levels and returns its
// number of parts.
func (s *limitScanner) key(depth int) (int, error) {
	n := 0
	for {
		s.skip(false)
		var length int
		switch s.peek() {
		case '"', '\'':
			length = s.str()
		default:
			if length = s.bare(true); length == 0 {
				return n, nil
			}
		}
		if length > maxTokenLen {
			return n, s.fail(errKeyLen)
		}
		if s.keys++; s.keys > maxKeys {
			return n, s.fail(errKeys)
		}
		if n++; depth+n > maxDepth {
			return n, s.fail(errTooDeep)
		}
		s.skip(false)
		if s.peek() != '.' {
			return n, nil
		}
		s.i++
	}
}
