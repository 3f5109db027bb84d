package logagg

// A template is the shape of a line with its variable parts masked:
//
//	step 100 loss=0.42 (12ms) on worker-7   →   step <N> loss = <N> ( <N> ) on worker-<N>
//
// Lines with equal templates are "similar". Masking instead of comparing
// lines with each other (edit distance) keeps the cost of a line linear in
// its length and independent of how many groups there are.
//
// The scanner below is hand-written: one pass splits the line into tokens,
// and each token is classified by a few bounded scans of its own bytes, so
// the whole line costs O(len). Tokens without a digit, the common case,
// are copied as they are after a single scan.

// Masks written in place of a variable token. Hex values share the mask
// of numbers: they are numbers in base 16, and an id field that happens to
// be all decimal digits must stay in its group.
const (
	maskNumber = "<N>"  // 42, -0.5, 1e-4, 97%, 12ms, 3.5GiB, 0x1f, 3fa9c2d1e8, 1b000
	maskUUID   = "<U>"  // 8-4-4-4-12 hex
	maskIP     = "<IP>" // IPv4, with an optional :port or /prefix
	maskTime   = "<T>"  // 2026-12-02, 2026-12-02T10:00:00.5Z, 10:00:00.123, 10:00
)

// Template returns the grouping key of a log line: its tokens separated
// by single spaces, with the variable ones masked. Tokens are split on
// ASCII whitespace and on = , ( ) [ ] and :, which are kept in the key as
// tokens of their own; a ':' between two digits (10:00:00, an address's
// port) does not split. A token that is a number (with sign, exponent,
// percent or unit: 12ms, 3.5GiB), a hex value (0x1f, or 8+ hex digits
// with a digit and a letter a-f), a UUID, an IPv4 address or a timestamp
// is masked whole; in any other token each run of digits, or of hex
// digits with a digit among them, is masked (step100 → step<N>, worker-12
// → worker-<N>). Non-ASCII text is kept as it is, and only ASCII digits
// count as digits, so a key holds no digit at all.
func Template(text string) string {
	return string(appendTemplate(nil, text))
}

// appendTemplate appends the template of s to dst, so that a caller with
// a reused buffer pays no allocation for lines of a known group.
func appendTemplate(dst []byte, s string) []byte {
	start := len(dst)
	n := len(s)
	for i := 0; i < n; {
		c := s[i]
		cl := byteClass[c]
		if cl&clsSpace != 0 {
			i++
			continue
		}
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		if cl&clsSep != 0 && (c != ':' || colonSplits(s, i)) {
			dst = append(dst, c)
			i++
			continue
		}
		// One pass finds the token's end and counts what appendToken
		// needs to know to skip the checks that cannot match.
		j, digits, hexLetters := i, 0, 0
		for ; j < n; j++ {
			cl := byteClass[s[j]]
			if cl&(clsSpace|clsSep) != 0 && (s[j] != ':' || colonSplits(s, j)) {
				break
			}
			digits += int(cl & clsDigit)
			hexLetters += int(cl&clsHexLetter) >> 1
		}
		dst = appendToken(dst, s[i:j], digits, hexLetters)
		i = j
	}
	return dst
}

// Byte classes, looked up once per byte of a line.
const (
	clsDigit     = 1 << iota // 0-9 (must be 1: it is added as a count)
	clsHexLetter             // a-f A-F (must be 2)
	clsSpace                 // ASCII whitespace
	clsSep                   // = , ( ) [ ] : (a ':' between digits excepted)
)

// byteClass is a constant table, computed once.
var byteClass = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = clsDigit
	}
	for _, c := range "abcdefABCDEF" {
		t[c] = clsHexLetter
	}
	for _, c := range " \t\n\r\v\f" {
		t[c] = clsSpace
	}
	for _, c := range "=,()[]:" {
		t[c] = clsSep
	}
	return t
}()

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHexDigit(c byte) bool { return byteClass[c]&(clsDigit|clsHexLetter) != 0 }

// isWordByte reports whether c belongs to the alphanumeric part of a token;
// bytes of multi-byte UTF-8 characters count as letters.
func isWordByte(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

// colonSplits reports whether the ':' at s[i] separates tokens: it does
// unless it sits between two digits (10:00:00, 10.0.0.1:29500).
func colonSplits(s string, i int) bool {
	return i == 0 || i+1 >= len(s) || !isDigit(s[i-1]) || !isDigit(s[i+1])
}

// appendToken appends tok, or its mask; digits and hexLetters count its
// bytes 0-9 and a-f A-F.
func appendToken(dst []byte, tok string, digits, hexLetters int) []byte {
	switch {
	case digits == 0:
		return append(dst, tok...)
	case isHex(tok, digits, hexLetters), isNumber(tok):
		return append(dst, maskNumber...)
	case isUUID(tok):
		return append(dst, maskUUID...)
	case isIPv4(tok):
		return append(dst, maskIP...)
	case isTimestamp(tok):
		return append(dst, maskTime...)
	}
	return appendMixed(dst, tok)
}

// appendMixed masks the variable parts of a token that is not one value as
// a whole. Within each alphanumeric run, a run of hex digits with a
// decimal digit among them is one value; otherwise each digit run is. The
// other bytes are kept: worker-12 → worker-<N>, step100 → step<N>,
// /data/shard-00042.tar → /data/shard-<N>.tar, 5[1b000] → <N>[<N>].
func appendMixed(dst []byte, tok string) []byte {
	for i := 0; i < len(tok); {
		if !isWordByte(tok[i]) {
			dst = append(dst, tok[i])
			i++
			continue
		}
		j := i
		for j < len(tok) && isWordByte(tok[j]) {
			j++
		}
		run := tok[i:j]
		if hexValue(run) {
			dst = append(dst, maskNumber...)
		} else {
			for k := 0; k < len(run); {
				if !isDigit(run[k]) {
					dst = append(dst, run[k])
					k++
					continue
				}
				for k < len(run) && isDigit(run[k]) {
					k++
				}
				dst = append(dst, maskNumber...)
			}
		}
		i = j
	}
	return dst
}

// hexValue reports whether s is all hex digits with at least one decimal
// digit: a value, even when short (NCCL bus ids such as 1b000, 5f).
func hexValue(s string) bool {
	digit := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isHexDigit(c) {
			return false
		}
		digit = digit || isDigit(c)
	}
	return digit
}

// isHex: 0x followed by hex digits, or 8+ hex digits with a digit and a
// letter (a commit, a span id). Only called for tokens with a digit.
func isHex(tok string, digits, hexLetters int) bool {
	if len(tok) > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X') {
		for i := 2; i < len(tok); i++ {
			if !isHexDigit(tok[i]) {
				return false
			}
		}
		return true
	}
	return len(tok) >= 8 && hexLetters > 0 && digits+hexLetters == len(tok)
}

// isNumber: an optional sign, then one or more number-unit pairs where
// only the last unit may be missing: 42, -0.5, 1e-4, 3.2E+10, .5, 97%,
// 12ms, 3.5s, 1h30m, 2.5GiB, 4x.
func isNumber(tok string) bool {
	i := 0
	if tok[0] == '+' || tok[0] == '-' {
		i++
	}
	for {
		j := scanDecimal(tok, i)
		if j == i {
			return false
		}
		if j == len(tok) {
			return true
		}
		k := scanUnit(tok, j)
		if k == j {
			return false
		}
		if k == len(tok) {
			return true
		}
		i = k
	}
}

// scanDecimal returns the end of the decimal number at s[i:] (i when there
// is none): digits, an optional fraction, an optional exponent.
func scanDecimal(s string, i int) int {
	j, mant := i, 0
	for j < len(s) && isDigit(s[j]) {
		j++
		mant++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && isDigit(s[j]) {
			j++
			mant++
		}
	}
	if mant == 0 {
		return i
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			j = k
		}
	}
	return j
}

// numberUnits may follow a number in the same token (m is minutes or
// mega, it does not matter which); they are matched ignoring ASCII case.
var numberUnits = []string{
	"%", "x",
	"ns", "us", "µs", "μs", "ms", "s", "sec", "m", "min", "h", "d",
	"b", "k", "kb", "kib", "mb", "mib", "g", "gb", "gib", "t", "tb", "tib",
}

// scanUnit returns the end of the unit at s[i:], or i. The unit must end
// the token or be followed by a digit (1h30m).
func scanUnit(s string, i int) int {
	end := i
	for j := i; j < len(s) && !isDigit(s[j]) && s[j] != '.'; j++ {
		end = j + 1
		if end-i > 4 {
			return i // no unit is that long
		}
	}
	if end == i {
		return i
	}
	word := s[i:end]
	for _, u := range numberUnits {
		if len(u) == len(word) && equalFoldASCII(u, word) {
			return end
		}
	}
	return i
}

// equalFoldASCII compares u (lower case) with w ignoring ASCII case.
func equalFoldASCII(u, w string) bool {
	for i := 0; i < len(u); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != u[i] {
			return false
		}
	}
	return true
}

// isUUID: 8-4-4-4-12 hex digits.
func isUUID(tok string) bool {
	if len(tok) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if tok[i] != '-' {
				return false
			}
		} else if !isHexDigit(tok[i]) {
			return false
		}
	}
	return true
}

// isIPv4: four dot-separated groups of 1-3 digits, then optionally :port
// or /prefix.
func isIPv4(tok string) bool {
	i := 0
	for g := 0; g < 4; g++ {
		if g > 0 {
			if i >= len(tok) || tok[i] != '.' {
				return false
			}
			i++
		}
		j := i
		for j < len(tok) && isDigit(tok[j]) && j-i < 3 {
			j++
		}
		if j == i {
			return false
		}
		i = j
	}
	if i == len(tok) {
		return true
	}
	if tok[i] != ':' && tok[i] != '/' {
		return false
	}
	return digitsTo(tok, i+1) == len(tok) && i+1 < len(tok)
}

// digitsTo returns the end of the digit run at s[i:].
func digitsTo(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// fixedDigits reports whether s[i:i+n] are n digits.
func fixedDigits(s string, i, n int) bool {
	if i+n > len(s) {
		return false
	}
	for k := i; k < i+n; k++ {
		if !isDigit(s[k]) {
			return false
		}
	}
	return true
}

// isTimestamp: a date (2026-12-02 or 2026/12/02), optionally followed by
// T or _ and a time; or a time alone: H:MM or HH:MM, optional :SS, optional
// .fraction, optional zone (Z, +01, +0100, +01:00).
func isTimestamp(tok string) bool {
	i := 0
	if fixedDigits(tok, 0, 4) && len(tok) >= 10 && (tok[4] == '-' || tok[4] == '/') &&
		fixedDigits(tok, 5, 2) && tok[7] == tok[4] && fixedDigits(tok, 8, 2) {
		if len(tok) == 10 {
			return true
		}
		if tok[10] != 'T' && tok[10] != '_' {
			return false
		}
		i = 11
	}
	return timeOfDayAt(tok, i) == len(tok)
}

// timeOfDayAt returns the end of the time of day at s[i:] (with its
// fraction and zone), or -1.
func timeOfDayAt(s string, i int) int {
	j := digitsTo(s, i)
	if j == i || j-i > 2 || j >= len(s) || s[j] != ':' || !fixedDigits(s, j+1, 2) {
		return -1
	}
	j += 3
	if j < len(s) && s[j] == ':' {
		if !fixedDigits(s, j+1, 2) {
			return -1
		}
		j += 3
	}
	if j < len(s) && s[j] == '.' {
		k := digitsTo(s, j+1)
		if k == j+1 {
			return -1
		}
		j = k
	}
	if j == len(s) {
		return j
	}
	switch s[j] {
	case 'Z', 'z':
		return j + 1
	case '+', '-':
		if !fixedDigits(s, j+1, 2) {
			return -1
		}
		j += 3
		if j < len(s) && s[j] == ':' {
			j++
		}
		if fixedDigits(s, j, 2) {
			j += 2
		}
		return j
	}
	return -1
}
