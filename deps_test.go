package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLayering keeps the import directions of DESIGN.md: each package may
// import only the monarch packages listed for it.
func TestLayering(t *testing.T) {
	const mod = "github.com/monarch-go/monarch"
	allowed := map[string][]string{
		"bus":         {},
		"hostsconfig": {},
		"logagg":      {"bus"},
		"ibverbs":     {"bus"},
		"launch":      {"hostsconfig", "bus"},
		"actorrt":     {"bus", "hostsconfig", "logagg"},
		"dtensor":     {"actorrt", "ibverbs", "bus", "hostsconfig", "logagg"},
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		rel, ok := strings.CutPrefix(pkg, mod+"/")
		if !ok {
			continue
		}
		top, _, _ := strings.Cut(rel, "/")
		may, known := allowed[top]
		if !known {
			continue // main, examples: may use anything
		}
		for _, imp := range strings.Fields(imports) {
			dep, ours := strings.CutPrefix(imp, mod+"/")
			if !ours {
				continue
			}
			depTop, _, _ := strings.Cut(dep, "/")
			if depTop == top || slices.Contains(may, depTop) {
				continue
			}
			t.Errorf("%s imports %s: %s may import only %v", rel, dep, top, may)
		}
	}
}
