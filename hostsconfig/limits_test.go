package hostsconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
)

// maxDecodeAlloc bounds what loading one file may allocate, whatever the
// file holds. It is a correctness bound, generous for the limits: the
// costliest file of TestLimitsAllow, which go up to every limit, takes
// under half of it (7.6 MiB: 5000 multi-line strings full of escapes,
// mostly the library's copies of them; a 1 MiB comment takes 5). A job
// that names a hosts file loads two files, so twice that.
const maxDecodeAlloc = 16 << 20

// lines returns n lines made by line(i).
func lines(n int, line func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(line(i))
		b.WriteByte('\n')
	}
	return b.String()
}

var rep = strings.Repeat

// pathological are files that go over one limit each, with the error
// loading them gives (as x.toml). Without the limits the nested shapes
// cost the TOML library quadratic memory: 1000 nested inline tables,
// 5 KB of text, cost it 120 MB. They are also seeds of FuzzDecode.
var pathological = []struct {
	name, src, want string
}{
	{"nested-inline-tables", "a = " + rep("{b = ", 1000) + "1" + rep("}", 1000) + "\n",
		"x.toml:1: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"nested-inline-tables-later-line", "scheduler = \"local\"\n[local]\nhosts = 1\n\nx = { y = [\n  " + rep("{b = ", 1000) + "1" + rep("}", 1000) + "]}\n",
		"x.toml:6: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"nested-arrays-of-inline-tables", "a = " + rep("[{b = ", 1000) + "1" + rep("}]", 1000) + "\n",
		"x.toml:1: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"nested-arrays", "a = " + rep("[", 1000) + "1" + rep("]", 1000) + "\n",
		"x.toml:1: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"deep-table-header", "scheduler = \"local\"\n[" + rep("a.", 2000) + "b]\nx = 1\n",
		"x.toml:2: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"deep-array-of-tables-header", "[[" + rep("a.", 2000) + "b]]\nx = 1\n",
		"x.toml:1: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"deep-dotted-key", rep("a.", 1000) + "b = 1\n",
		"x.toml:1: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"dotted-key-below-a-table", "[a.b.c.d.e.f]\ng.h.i.j = 1\ng.h.i.j.k = 1\n",
		"x.toml:3: nested more than 10 levels deep (tables, dotted keys, arrays and inline tables), the limit for a configuration file"},
	{"long-key", "scheduler = \"local\"\n" + rep("k", 1000) + " = 1\n",
		"x.toml:2: key longer than 128 bytes, the limit for a configuration file"},
	{"long-quoted-key", `"` + rep("k", 129) + `" = 1` + "\n",
		"x.toml:1: key longer than 128 bytes, the limit for a configuration file"},
	{"long-key-in-header", "[slurm." + rep("k", 1000) + "]\n",
		"x.toml:1: key longer than 128 bytes, the limit for a configuration file"},
	{"long-key-in-inline-table", "bus = { " + rep("k", 1000) + " = 1 }\n",
		"x.toml:1: key longer than 128 bytes, the limit for a configuration file"},
	{"huge-integer", "scheduler = \"slurm\"\n[slurm]\nnodes = " + rep("9", 1000) + "\n",
		"x.toml:3: unquoted value longer than 128 bytes, the limit for a configuration file"},
	{"huge-float", "x = 1." + rep("9", 1000) + "e5\n",
		"x.toml:1: unquoted value longer than 128 bytes, the limit for a configuration file"},
	{"huge-integer-in-array", "args = [1, 2,\n" + rep("9", 1000) + "]\n",
		"x.toml:2: unquoted value longer than 128 bytes, the limit for a configuration file"},
	{"many-keys", lines(2001, func(i int) string { return fmt.Sprintf("k%d = 1", i) }),
		"x.toml:2001: more than 2000 keys, the limit for a configuration file"},
	{"many-dotted-keys", lines(1001, func(i int) string { return fmt.Sprintf("env.K%d = 1", i) }),
		"x.toml:1001: more than 2000 keys, the limit for a configuration file"},
	{"long-array-of-tables", lines(2001, func(int) string { return "[[a]]" }),
		"x.toml:2001: more than 2000 keys, the limit for a configuration file"},
	{"many-keys-in-inline-tables", "a = [" + rep("{b = 1, c = 2}, ", 1000) + "]\n",
		"x.toml:1: more than 2000 keys, the limit for a configuration file"},
	{"many-lines", "scheduler = 'local'\n" + lines(maxLines, func(int) string { return "#" }),
		"x.toml:10001: more than 10000 lines, the limit for a configuration file"},
	{"long-array", "args = [" + rep("1,", maxValues) + "]\n",
		"x.toml:1: more than 5000 values, the limit for a configuration file"},
	{"long-array-over-lines", "args = [ # one a line\n" + lines(maxValues, func(int) string { return "1," }) + "]\n",
		"x.toml:5001: more than 5000 values, the limit for a configuration file"},
}

// loaders are the three ways to load a file.
var loaders = map[string]func(string) error{
	"Load":      func(p string) error { _, err := Load(p); return err },
	"LoadHosts": func(p string) error { _, err := LoadHosts(p); return err },
	"LoadJob":   func(p string) error { _, err := LoadJob(p); return err },
}

// TestPathological: each file that goes over a limit is refused with
// the limit's message, at the line where it goes over, by each loader,
// and costs a bounded allocation.
func TestPathological(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tt := range pathological {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile("x.toml", []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, load := range loaders {
				var err error
				if n := alloc.By(func() { err = load("x.toml") }); n > maxDecodeAlloc {
					t.Errorf("%s allocated %d MiB, want at most %d", name, n>>20, maxDecodeAlloc>>20)
				}
				if err == nil || err.Error() != tt.want {
					t.Errorf("%s: error\n%.500v\nwant\n%s", name, err, tt.want)
				}
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Errorf("%s: error is a %T, not a *ConfigError", name, err)
				}
			}
		})
	}
}

// TestFileSizeLimit: a file over MaxFileSize is refused without reading
// it all, whether its size is known beforehand or not; one of exactly
// MaxFileSize loads.
func TestFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("testdata/good/local.toml")
	if err != nil {
		t.Fatal(err)
	}
	padded := func(size int) []byte {
		comment := "#" + rep("x", size-len(good)-2) + "\n"
		return append([]byte(comment), good...)
	}
	atLimit := filepath.Join(dir, "at-limit.toml")
	over := filepath.Join(dir, "over.toml")
	sparse := filepath.Join(dir, "sparse.toml")
	if err := os.WriteFile(atLimit, padded(MaxFileSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, padded(MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sparse file of 64 MiB: without the limit it was read whole.
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("at the limit", func(t *testing.T) {
		var err error
		if n := alloc.By(func() { _, err = LoadHosts(atLimit) }); n > maxDecodeAlloc {
			t.Errorf("allocated %d MiB, want at most %d", n>>20, maxDecodeAlloc>>20)
		}
		if err != nil {
			t.Errorf("a file of exactly MaxFileSize: %v", err)
		}
	})
	for _, tt := range []struct{ name, path string }{
		{"over the limit", over},
		{"sparse", sparse},
		{"no size beforehand", "/dev/zero"}, // without the limit, read until memory ran out
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat(tt.path); err != nil {
				t.Skip(err)
			}
			var err error
			if n := alloc.By(func() { _, err = Load(tt.path) }); n > 4<<20 {
				t.Errorf("allocated %d MiB, want at most 4", n>>20)
			}
			want := tt.path + ": larger than 1 MiB, the limit for a configuration file"
			if err == nil || err.Error() != want {
				t.Errorf("error %.300v\nwant %s", err, want)
			}
		})
	}
}

// TestLimitsAllow: files that go up to the limits without going over
// are not refused for them, and still cost a bounded allocation (the
// limits are what bounds it: each of these is near the most a file
// within them can cost).
func TestLimitsAllow(t *testing.T) {
	dir := t.TempDir()
	key := func(i int) string { return fmt.Sprintf("%0128d", i) }
	tables := "[" + strings.Join(strings.Split("abcdefghi", ""), ".") + "]\n" // 9 keys, 9 deep
	// The costliest file found: as many multi-line strings full of
	// escapes as fit, after head.
	costliest := func(head string) string {
		s := `"""` + rep("x\\n", 60) + "\n" + `""", `
		n := min(maxValues-3, (MaxFileSize-len(head)-8)/len(s)) // head: 2 values
		return head + "a = [" + rep(s, n) + "]\n"
	}
	jobHead := "hosts = 'h.toml'\nprogram = '/bin/sh'\n"
	tests := []struct{ name, src string }{
		{"deepest inline tables", "a = " + rep("{b = ", 9) + "1" + rep("}", 9) + "\n"},
		{"deepest arrays", "a = " + rep("[", 9) + "1" + rep("]", 9) + "\n"},
		{"most keys, deepest and longest", tables + lines(maxKeys-9, func(i int) string { return key(i) + " = 1" })},
		{"most dotted keys, deepest", lines(maxKeys/10, func(i int) string { return fmt.Sprintf("a.b.c.d.e.f.g.h.i.k%d = 1", i) })},
		{"most keys in inline tables, deepest", "a.b.c.d.e.f = [" + rep("{h.i.j = 1}, ", (maxKeys-6)/3) + "]\n"},
		{"most values, deepest", "a.b.c.d.e.f.g.h.i = [" + rep("{}, ", maxValues-1) + "]\n"},
		{"most values, longest", "a = [" + rep("1."+rep("0", 126)+", ", min(maxValues-1, (MaxFileSize-8)/130)) + "]\n"},
		{"most headers, deepest", lines(maxKeys/9, func(i int) string { return "[[a.b.c.d.e.f.g.h.i]]" })},
		{"largest string", "a = '" + rep("x", MaxFileSize-7) + "'\n"},
		{"largest multi-line string", "a = \"\"\"" + rep(rep("x\\n", 300)+"\n", (MaxFileSize-12)/901) + "\"\"\"\n"},
		{"most multi-line strings", costliest("")},
		{"a job and its hosts file, both the costliest", costliest(jobHead)},
		{"most strings", "a = [" + rep("'"+rep("x", 100)+"', ", min(maxValues-1, (MaxFileSize-8)/105)) + "]\n"},
		{"brackets in strings and comments", lines(maxKeys/2, func(i int) string {
			return fmt.Sprintf(`k%d = ["[[[[[[{{{{{\"", '[[[[[[[[[', """[[[[[[[[{{{{""""", '''[[[[[['''] # [[[[[[[[[[[[`, i)
		})},
		{"most lines, a syntax error at the end", rep("\n", maxLines) + "a = "},
		{"most lines, a syntax error at the start", "a = \n" + rep("\n", maxLines-1)},
		{"most lines of a string, unclosed", "a = \"\"\"" + rep(rep("x", 100)+"\n", maxLines)},
		{"most unknown keys", lines(maxKeys, func(i int) string { return key(i) + " = 1" })},
		{"most unknown keys in a table", "scheduler = 'slurm'\n[slurm]\n" + lines(maxKeys-2, func(i int) string { return key(i) + " = 1" })},
		{"most errors in an array", "scheduler = 'ssh'\n[ssh]\nhosts = [" + rep("1, ", maxValues-3) + "]\n"},
	}
	if err := os.WriteFile(filepath.Join(dir, "h.toml"), []byte(costliest("")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.src) > MaxFileSize {
				t.Fatalf("test file of %d bytes is over MaxFileSize", len(tt.src))
			}
			path := filepath.Join(dir, "x.toml")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, load := range loaders {
				var err error
				n := alloc.By(func() { err = load(path) })
				t.Logf("%s: %d KiB file, allocated %d KiB", name, len(tt.src)>>10, n>>10)
				bound := uint64(maxDecodeAlloc)
				if strings.HasPrefix(tt.src, jobHead) && name != "LoadHosts" {
					bound *= 2 // and h.toml
				}
				if n > bound {
					t.Errorf("%s allocated %d MiB, want at most %d", name, n>>20, bound>>20)
				}
				if err != nil && strings.Contains(err.Error(), "the limit for a configuration file") {
					t.Errorf("%s refused it for a limit: %.300v", name, err)
				}
			}
		})
	}
}
