package hostsconfig

// scanner is what both passes over a file's bytes share: checkLimits's
// (limitScanner, before the TOML library sees the file) and indexLines's
// (lineScanner, after it parsed the file). It moves over TOML's tokens
// (blanks, comments, strings of the four kinds, unquoted keys and values)
// as the library would on valid TOML, counting lines, without allocating
// and in linear time on any bytes.
type scanner struct {
	src  string
	i    int // next byte
	line int // line of src[i]
}

// bare moves past an unquoted key part (stopping at a dot) or value,
// and returns its length.
func (s *scanner) bare(key bool) int {
	start := s.i
	for s.i < len(s.src) {
		switch s.src[s.i] {
		case ' ', '\t', '\r', '\n', '#', ',', '=', '[', ']', '{', '}', '"', '\'':
			return s.i - start
		case '.':
			if key {
				return s.i - start
			}
		}
		s.i++
	}
	return s.i - start
}

// str moves past a string of any of TOML's four kinds and returns the
// length of its content. A one-line string ends at its line's end even
// unclosed.
func (s *scanner) str() int {
	q := s.src[s.i]
	escapes := q == '"'
	if s.i+2 < len(s.src) && s.src[s.i+1] == q && s.src[s.i+2] == q {
		s.i += 3
		start := s.i
		for s.i < len(s.src) {
			c := s.src[s.i]
			if c == q && s.i+2 < len(s.src) && s.src[s.i+1] == q && s.src[s.i+2] == q {
				n := s.i - start
				s.i += 3
				for k := 0; k < 2 && s.peek() == q; k++ { // a string may end in up to two quotes
					s.i++
					n++
				}
				return n
			}
			if escapes && c == '\\' && s.i+1 < len(s.src) {
				s.i++
				c = s.src[s.i]
			}
			if c == '\n' {
				s.line++
			}
			s.i++
		}
		return s.i - start
	}
	s.i++
	start := s.i
	for s.i < len(s.src) {
		switch c := s.src[s.i]; {
		case c == q:
			s.i++
			return s.i - 1 - start
		case c == '\n':
			return s.i - start
		case escapes && c == '\\' && s.i+1 < len(s.src) && s.src[s.i+1] != '\n':
			s.i++
		}
		s.i++
	}
	return s.i - start
}

// skip moves past blanks and comments, and with newlines past line ends.
func (s *scanner) skip(newlines bool) {
	for s.i < len(s.src) {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t' || c == '\r':
			s.i++
		case c == '#':
			for s.i < len(s.src) && s.src[s.i] != '\n' {
				s.i++
			}
		case newlines && c == '\n':
			s.i++
			s.line++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.src) {
		return s.src[s.i]
	}
	return 0
}

// skipLine moves past the rest of the line and its end.
func (s *scanner) skipLine() {
	for s.i < len(s.src) && s.src[s.i] != '\n' {
		s.i++
	}
	if s.i < len(s.src) {
		s.i++
		s.line++
	}
}
