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
		"bus":         {"internal/dropnames"},
		"hostsconfig": {"internal/didyoumean", "internal/arrayspec"},
		"logagg":      {"bus", "internal/privfs", "internal/procid"},
		"ibverbs":     {"bus", "internal/jobenv", "internal/door"},
		"launch":      {"hostsconfig", "bus", "logagg", "internal/jobstate", "internal/jobenv", "internal/child", "internal/procstat", "internal/hostlink", "internal/bincache", "internal/jobca", "internal/munge", "internal/arrayspec"},
		"actorrt":     {"bus", "hostsconfig", "logagg", "internal/jobstate", "internal/jobenv", "internal/wire", "internal/hostagent", "internal/delivery", "internal/jobctl", "internal/jobview"},
		"dtensor":     {"actorrt", "ibverbs", "bus", "hostsconfig", "logagg", "collective"},
		"spmd":        {"actorrt"},
		// The in-process cluster for tests: above the SDK, which never
		// imports it.
		"actorrt/actortest": {"actorrt", "internal/jobenv", "internal/hostagent"},
		"collective":        {"actorrt", "ibverbs"},
		// Internal packages are layers of their own.
		"internal/privfs":    {},
		"internal/procid":    {},
		"internal/jobstate":  {"internal/privfs", "internal/procid", "hostsconfig", "logagg"},
		"internal/jobenv":    {"hostsconfig", "logagg"},
		"internal/child":     {},
		"internal/procstat":  {},
		"internal/wire":      {"internal/dropnames"},
		"internal/dropnames": {},
		"internal/reliable":  {},
		"internal/delivery":  {"bus", "ibverbs", "internal/jobenv", "internal/reliable", "internal/wire"},
		"internal/hostagent": {"bus", "logagg", "internal/jobenv", "internal/jobstate", "internal/wire", "internal/child", "internal/procstat", "internal/hostlink", "internal/jobca", "internal/munge", "internal/bincache"},
		"internal/hostlink":  {"internal/door"},
		"internal/door":      {},
		"internal/jobca":     {},
		"internal/munge":     {},
		"internal/bincache":  {},
		"internal/jobctl":    {"internal/privfs"},
		"internal/dashboard": {"internal/jobctl", "logagg"},
		"internal/topview":   {"internal/jobctl"},
		"internal/jobview":   {"hostsconfig", "logagg", "internal/jobctl", "internal/wire", "internal/procstat", "internal/dashboard", "internal/metrics"},
		"internal/metrics":   {"internal/jobctl", "internal/promtest"},
		"internal/promtest":  {"internal/testenv"},

		// The did-you-mean of hostsconfig's keys and the command line's words.
		"internal/didyoumean": {},
		// sbatch's --array syntax, for hostsconfig's [array] and the CLI.
		"internal/arrayspec": {},
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
		top := layer(rel)
		may, known := allowed[top]
		for _, imp := range strings.Fields(imports) {
			dep, ours := strings.CutPrefix(imp, mod+"/")
			if !ours {
				continue
			}
			depTop := layer(dep)
			if depTop == "internal/cli" && top != depTop {
				t.Errorf("%s imports %s: the command is main.go's alone", rel, dep)
			}
			if !known {
				continue // main, examples, systest: may use anything
			}
			if depTop == top || slices.Contains(may, depTop) {
				continue
			}
			t.Errorf("%s imports %s: %s may import only %v", rel, dep, top, may)
		}
	}
}

// layer is the part of the module a package belongs to: its top dir, or
// for internal packages, internal/<name>.
func layer(rel string) string {
	parts := strings.SplitN(rel, "/", 3)
	if (parts[0] == "internal" || rel == "actorrt/actortest" || strings.HasPrefix(rel, "actorrt/actortest/")) && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}
