package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoProcessUmask: no code of monarch sets the umask. It is the whole
// process's, so setting it around one file (as jobctl once did around its
// socket's bind) gives its mode to whatever another goroutine creates
// meanwhile: a folder made then would be 0600. Private files get their
// mode where they are made instead (internal/privfs, jobctl's socket).
func TestNoProcessUmask(t *testing.T) {
	call := regexp.MustCompile(`\bUmask\s*\(`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(line, "//"); call.MatchString(code) {
				t.Errorf("%s:%d sets the process's umask: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
