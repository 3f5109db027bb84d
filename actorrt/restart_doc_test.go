package actorrt_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv"
)

// TestRestartDocNamesTests: every test the package doc's "Restarts in
// place" names as holding a promise exists (in actorrt or any package of
// the module), and so does every script it names, so that the doc cannot
// go on citing a test that was renamed or removed.
func TestRestartDocNamesTests(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(doc), "// # Restarts in place")
	end := strings.Index(string(doc), "// # The end of an actor")
	if start < 0 || end < start {
		t.Fatal(`doc.go has no section "Restarts in place" before "The end of an actor"`)
	}
	section := string(doc[start:end])
	defined := testenv.TestFuncs(t, "..")
	named := regexp.MustCompile(`\b((?:Test|Benchmark)[A-Z]\w*)`).FindAllStringSubmatch(section, -1)
	if len(named) < 10 {
		t.Fatalf("the doc's Restarts in place names %d tests; the pattern no longer finds them", len(named))
	}
	for _, m := range named {
		if !defined[m[1]] {
			t.Errorf("the doc's Restarts in place names %s, which no _test.go of the module defines", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`testdata/\S+\.txt`).FindAllString(section, -1) {
		if _, err := os.Stat(m); err != nil {
			t.Errorf("the doc's Restarts in place names script %s: %v", m, err)
		}
	}
}
