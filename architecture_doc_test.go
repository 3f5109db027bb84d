package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureNamesPackages keeps docs/architecture.md true as the
// house changes: every package of the module (but the example and test
// programs) is named on the page, and every package path and Go file the
// page names exists.
func TestArchitectureNamesPackages(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	named := namesIn(string(doc))
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/monarch-go/monarch"
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		if rel == "" || strings.HasPrefix(rel, "examples/") || strings.HasPrefix(rel, "testprogs/") || strings.HasPrefix(rel, "internal/testenv/") {
			continue
		}
		if !named[rel] {
			t.Errorf("docs/architecture.md does not name package %s", rel)
		}
	}
	files := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files[d.Name()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	goFiles := regexp.MustCompile(`\b[a-z][a-z0-9_]*\.go\b`).FindAllString(string(doc), -1)
	if len(goFiles) < 20 {
		t.Fatalf("docs/architecture.md names %d Go files; the pattern no longer finds them", len(goFiles))
	}
	for _, f := range goFiles {
		if !files[f] {
			t.Errorf("docs/architecture.md names %s, which is no file of the repository", f)
		}
	}
	for _, m := range regexp.MustCompile("`((?:internal|actorrt)/[a-z/]+)`").FindAllStringSubmatch(string(doc), -1) {
		if st, err := os.Stat(m[1]); err != nil || !st.IsDir() {
			t.Errorf("docs/architecture.md names %s, which is no folder of the repository", m[1])
		}
	}
}

// namesIn is every package path the text names, as a word (internal/wire)
// or in a group (internal/{wire, jobenv}).
func namesIn(text string) map[string]bool {
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`([a-z]+)/\{([a-z, ]+)\}`).FindAllStringSubmatch(text, -1) {
		for _, p := range strings.Split(m[2], ",") {
			named[m[1]+"/"+strings.TrimSpace(p)] = true
		}
	}
	for _, w := range regexp.MustCompile(`[a-z][a-z0-9_]*(?:/[a-z][a-z0-9_]*)*`).FindAllString(text, -1) {
		named[w] = true
	}
	return named
}
