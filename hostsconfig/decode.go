package hostsconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/monarch-go/monarch/internal/didyoumean"
)

// Strict decoding. The TOML library decodes a file into plain values
// (map[string]any, []any, string, int64, float64, bool, time.Time) and
// each schema then reads them through a table: every read checks the
// type, every problem becomes a *ConfigError with the key's line, and
// the keys a table does not know are errors too. Decoding straight into
// structs would let the library word the type errors and would lose the
// lines, which are what users need.

// doc is one parsed configuration file.
type doc struct {
	file  string         // as named to the user
	dir   string         // absolute directory of the file: relative paths in it start here
	keys  []toml.Key     // every key, in file order
	lines map[string]int // key path (toml.Key.String, elements "k[i]") -> line
	errs  *errorList
}

// parseFile reads and parses path. On failure it records the error in
// errs and returns nil.
func parseFile(path string, errs *errorList) *table {
	data, err := readLimited(path)
	switch {
	case errors.Is(err, errSize):
		errs.add(&ConfigError{File: path, Msg: err.Error() + limitMsg})
		return nil
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in ConfigError.File
		}
		errs.add(&ConfigError{File: path, Msg: err.Error()})
		return nil
	}
	src := string(data)
	// Before the library sees it: see the limits in limits.go.
	if le := checkLimits(src); le != nil {
		errs.add(&ConfigError{File: path, Line: le.line, Msg: le.err.Error() + limitMsg})
		return nil
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		errs.add(&ConfigError{File: path, Msg: err.Error()})
		return nil
	}
	var root map[string]any
	md, err := toml.Decode(src, &root)
	if err != nil {
		e := &ConfigError{File: path, Msg: err.Error()}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			e.Line, e.Key, e.Msg = pe.Position.Line, pe.LastKey, pe.Message
		}
		errs.add(e)
		return nil
	}
	d := &doc{file: path, dir: dir, keys: md.Keys(), lines: indexLines(src), errs: errs}
	return &table{doc: d, m: root}
}

// line returns the line of key, or of its element elem ("[2]") when elem
// is not empty; failing that, of the nearest enclosing key the file
// writes; failing that (a missing top-level key), 0.
func (d *doc) line(key toml.Key, elem string) int {
	if n, ok := d.lines[key.String()+elem]; ok {
		return n
	}
	for k := key; len(k) > 0; k = k[:len(k)-1] {
		if n, ok := d.lines[k.String()]; ok {
			return n
		}
	}
	return 0
}

// table reads one TOML table of a file. A table the file does not write
// has a nil map: every key is then absent and its defaults apply.
type table struct {
	doc *doc
	key toml.Key // path from the file's root; empty for the root
	m   map[string]any
}

func (t *table) path(k string) toml.Key { return append(slices.Clip(t.key), k) }

// name is the key as errors name it: its dotted path from the file's root.
func (t *table) name(k string) string { return t.path(k).String() }

// fail records a problem with key k of t.
func (t *table) fail(k, format string, args ...any) {
	t.failElem(k, "", format, args...)
}

// failElem records a problem with element elem ("[2]") of key k, or with
// k itself when elem is empty.
func (t *table) failElem(k, elem, format string, args ...any) {
	key, line := t.key.String(), t.doc.line(t.key, "")
	if k != "" {
		key, line = t.name(k)+elem, t.doc.line(t.path(k), elem)
	}
	t.doc.errs.add(&ConfigError{File: t.doc.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// failTable records a problem with the table as a whole, at its line.
func (t *table) failTable(format string, args ...any) {
	t.doc.errs.add(&ConfigError{File: t.doc.file, Line: t.doc.line(t.key, ""), Msg: fmt.Sprintf(format, args...)})
}

func (t *table) has(k string) bool {
	_, ok := t.m[k]
	return ok
}

// missing records that required key k is absent.
func (t *table) missing(k string) { t.fail(k, "required key missing") }

// str reads a string. It reports whether k was given with the right type.
func (t *table) str(k string, dst *string) bool {
	v, ok := t.m[k]
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.fail(k, "want a string, got %s", describeValue(v))
		return false
	}
	*dst = s
	return true
}

// integer reads an integer. It reports whether k was given with the right type.
func (t *table) integer(k string, dst *int) bool {
	v, ok := t.m[k]
	if !ok {
		return false
	}
	n, ok := v.(int64)
	if !ok {
		t.fail(k, "want an integer, got %s", describeValue(v))
		return false
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		t.fail(k, "want an integer from %d to %d, got %d", math.MinInt32, math.MaxInt32, n)
		return false
	}
	*dst = int(n)
	return true
}

// boolean reads true or false. It reports whether k was given with the right type.
func (t *table) boolean(k string, dst *bool) bool {
	v, ok := t.m[k]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		t.fail(k, "want true or false, got %s", describeValue(v))
		return false
	}
	*dst = b
	return true
}

// strings reads an array of strings. It reports whether k was given
// with the right type, every element included.
func (t *table) strings(k string, dst *[]string) bool {
	v, ok := t.m[k]
	if !ok {
		return false
	}
	arr, ok := v.([]any)
	if !ok {
		t.fail(k, "want an array of strings, got %s", describeValue(v))
		return false
	}
	out, good := make([]string, 0, len(arr)), true
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			t.failElem(k, elem(i), "want a string, got %s", describeValue(e))
			good = false
			continue
		}
		out = append(out, s)
	}
	if good {
		*dst = out
	}
	return good
}

// duration reads a Go duration string such as "30s" or "1m30s". It
// reports whether k was given and parsed.
func (t *table) duration(k string, dst *time.Duration) bool {
	v, ok := t.m[k]
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.fail(k, `want a duration such as "30s", got %s`, describeValue(v))
		return false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.fail(k, "bad duration %q: %v", s, err)
		return false
	}
	*dst = d
	return true
}

// sub returns table k of t: empty when absent, nil (with the error
// recorded) when k is not a table.
func (t *table) sub(k string) *table {
	v, ok := t.m[k]
	if !ok {
		return &table{doc: t.doc, key: t.path(k)}
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.fail(k, "want a table, got %s", describeValue(v))
		return nil
	}
	return &table{doc: t.doc, key: t.path(k), m: m}
}

// children returns the keys of t in the order the file writes them.
func (t *table) children() []string {
	var out []string
	seen := map[string]bool{} // a set, not slices.Contains: a table may have thousands of keys
	for _, k := range t.doc.keys {
		if len(k) > len(t.key) && slices.Equal(k[:len(t.key)], t.key) {
			if c := k[len(t.key)]; !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	for _, c := range slices.Sorted(maps.Keys(t.m)) { // not expected: the library lists every key
		if !seen[c] {
			out = append(out, c)
		}
	}
	return out
}

// unknown records every key of t that is not in known, with the closest
// known key as a suggestion.
func (t *table) unknown(known ...string) {
	for _, k := range t.children() {
		if !t.has(k) || slices.Contains(known, k) {
			continue
		}
		msg := "unknown key"
		if s := didyoumean.Closest(k, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		t.fail(k, "%s", msg)
	}
}

// localPath resolves a file name written in the file: "~/" is the user's
// home directory and relative names start at the file's directory.
func (t *table) localPath(k, p string) (string, bool) {
	if rest, ok := strings.CutPrefix(p, "~/"); ok || p == "~" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.fail(k, "cannot expand ~: %v", err)
			return "", false
		}
		p = filepath.Join(home, rest)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(t.doc.dir, p)
	}
	return filepath.Clean(p), true
}

// existingFile reads key k as the name of a regular file that must exist,
// resolved as localPath does.
func (t *table) existingFile(k string, dst *string) {
	var s string
	if !t.str(k, &s) {
		return
	}
	if s == "" {
		t.fail(k, "empty file name")
		return
	}
	p, ok := t.localPath(k, s)
	if !ok {
		return
	}
	switch fi, err := os.Stat(p); {
	case errors.Is(err, fs.ErrNotExist):
		t.fail(k, "%s does not exist", p)
	case err != nil:
		t.fail(k, "%v", err)
	case fi.IsDir():
		t.fail(k, "%s is a directory, want a file", p)
	default:
		*dst = p
	}
}

func elem(i int) string { return "[" + strconv.Itoa(i) + "]" }

// describeValue names a decoded TOML value's type, with the value when
// it is short, for "want X, got Y" messages.
func describeValue(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 60 {
			v = v[:57] + "..."
		}
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case time.Time:
		return "a date-time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

// Line finding. The library knows where each key is but does not say
// (MetaData.Undecoded and Keys give no positions), so indexLines scans the
// file once, after the library has parsed it and so knows it is valid
// TOML, and notes the line where each key path first appears: [table]
// and [[array]] headers, dotted keys, keys of inline tables (at any
// depth), and the elements of arrays as "key[i]". It cannot fail: what
// it does not follow it skips to the end of the line.

func indexLines(src string) map[string]int {
	s := &lineScanner{scanner: scanner{src: src, line: 1}, lines: map[string]int{}}
	s.document()
	return s.lines
}

type lineScanner struct {
	scanner
	lines map[string]int
}

func (s *lineScanner) document() {
	var table toml.Key
	for {
		s.skip(true)
		if s.i >= len(s.src) {
			return
		}
		switch {
		case strings.HasPrefix(s.src[s.i:], "[["):
			s.i += 2
			table = s.key()
			s.note(table, "")
		case s.peek() == '[':
			s.i++
			table = s.key()
			s.note(table, "")
		default:
			if k := s.key(); len(k) > 0 {
				full := concatKeys(table, k)
				s.note(full, "")
				s.skip(false)
				if s.peek() == '=' {
					s.i++
					s.value(full)
				}
			}
		}
		s.skipLine() // a header's "]", a comment
	}
}

// value skips one value, noting the keys of inline tables and the
// elements of arrays under path.
func (s *lineScanner) value(path toml.Key) {
	s.skip(false)
	rest := s.src[s.i:]
	switch {
	case strings.HasPrefix(rest, `"`), strings.HasPrefix(rest, "'"):
		s.str()
	case strings.HasPrefix(rest, "["):
		s.i++
		for n := 0; ; {
			s.skip(true)
			switch s.peek() {
			case 0:
				return
			case ']':
				s.i++
				return
			case ',':
				s.i++
				continue
			}
			s.note(path, elem(n))
			n++
			before := s.i
			s.value(path)
			if s.i == before {
				s.i++
			}
		}
	case strings.HasPrefix(rest, "{"):
		s.i++
		for {
			s.skip(true)
			switch s.peek() {
			case 0:
				return
			case '}':
				s.i++
				return
			case ',':
				s.i++
				continue
			}
			k := s.key()
			if len(k) == 0 {
				s.i++
				continue
			}
			full := concatKeys(path, k)
			s.note(full, "")
			s.skip(false)
			if s.peek() == '=' {
				s.i++
			}
			s.value(full)
		}
	default: // number, boolean, date-time
		for s.i < len(s.src) && !strings.ContainsRune(",]}#\r\n", rune(s.src[s.i])) {
			s.i++
		}
	}
}

// key reads a possibly dotted key such as a."b c".d.
func (s *lineScanner) key() toml.Key {
	var k toml.Key
	for {
		s.skip(false)
		part, ok := s.keyPart()
		if !ok {
			return k
		}
		if len(k) < maxKeyDepth {
			k = append(k, part)
		}
		s.skip(false)
		if s.peek() != '.' {
			return k
		}
		s.i++
	}
}

func (s *lineScanner) keyPart() (string, bool) {
	start := s.i
	switch q := s.peek(); q {
	case '"', '\'':
		n := s.str()
		raw := s.src[start+1 : start+1+n]
		if q == '"' {
			if u, err := strconv.Unquote(`"` + raw + `"`); err == nil {
				return u, true
			}
		}
		return raw, true
	}
	n := s.bare(true)
	return s.src[start:s.i], n > 0
}

// note records the line of key and of each key that contains it, or of
// one element of key, where no earlier line was recorded.
func (s *lineScanner) note(key toml.Key, elem string) {
	if elem != "" {
		if name := key.String() + elem; s.lines[name] == 0 {
			s.lines[name] = s.line
		}
		return
	}
	// The keys noted are closed under prefixes: the first prefix found
	// noted, from the longest, ends the walk, which keeps deeply nested
	// inline tables linear.
	for i := len(key); i >= 1; i-- {
		name := key[:i].String()
		if s.lines[name] != 0 {
			return
		}
		s.lines[name] = s.line
	}
}

func isBareKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// maxKeyDepth bounds the key paths the line finder follows: deeper keys
// (no configuration has them) take the line of their ancestor at this
// depth, and absurd nesting costs linear time.
const maxKeyDepth = 16

func concatKeys(a, b toml.Key) toml.Key {
	k := append(slices.Clip(a), b[:min(len(b), max(0, maxKeyDepth-len(a)))]...)
	return k[:min(len(k), maxKeyDepth)]
}
