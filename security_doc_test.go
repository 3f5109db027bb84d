package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv"
)

// TestSecurityDocNamesTests: every test, fuzz target, benchmark and
// script docs/security.md names as holding a promise exists, so that the
// page cannot go on citing a test that was renamed or removed.
func TestSecurityDocNamesTests(t *testing.T) {
	doc, err := os.ReadFile("docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := testenv.TestFuncs(t, ".")
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)\\w+)`").FindAllSubmatch(doc, -1)
	if len(named) < 40 {
		t.Fatalf("docs/security.md names %d tests; the pattern no longer finds them", len(named))
	}
	for _, m := range named {
		if !defined[string(m[1])] {
			t.Errorf("docs/security.md names %s, which no _test.go defines", m[1])
		}
	}
	for _, m := range regexp.MustCompile("`(\\w+\\.txt)`").FindAllSubmatch(doc, -1) {
		if _, err := os.Stat(filepath.Join("internal/reliable/testdata/scripts", string(m[1]))); err != nil {
			t.Errorf("docs/security.md names script %s: %v", m[1], err)
		}
	}
}
