package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docBlock returns the first ```sh block of section (a "## " heading) of
// a docs/ page.
func docBlock(t *testing.T, page, section string) string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n"+section+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", page, section)
	}
	rest, _, _ = strings.Cut(rest, "\n## ")
	_, block, ok := strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("%s, %s: no sh block", page, section)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// TestSweepsDocAfter runs the example of docs/sweeps.md's "Jobs that wait
// on jobs" as written, each line with the ids the lines before printed
// in place of the page's (which its comments name): evaluate waits for
// train, then runs.
func TestSweepsDocAfter(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	env := append(os.Environ(), "PATH="+build(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var ids, real []string // the page's, and this run's
	var status string
	for _, line := range strings.Split(strings.TrimSpace(docBlock(t, "docs/sweeps.md", "## Jobs that wait on jobs")), "\n") {
		line, comment, _ := strings.Cut(line, "#")
		pairs := make([]string, 0, 2*len(ids))
		for i := range ids {
			pairs = append(pairs, ids[i], real[i])
		}
		cmd := exec.Command("/bin/sh", "-c", strings.NewReplacer(pairs...).Replace(line))
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		if f := strings.Fields(comment); len(f) > 0 {
			ids, real = append(ids, f[len(f)-1]), append(real, strings.TrimSpace(string(out)))
		}
		status = string(out)
	}
	if len(real) != 2 || !strings.Contains(status, "job:         "+real[1]+"\n") {
		t.Fatalf("the example printed ids %q, then:\n%s", real, status)
	}
	train, evaluate := real[0], real[1]
	waitUntil(t, 30*time.Second, "evaluate to be done", func() bool { return record(t, evaluate).State == "done" })
	if tr, ev := record(t, train), record(t, evaluate); tr.State != "done" || ev.Started.Before(tr.Ended) {
		t.Errorf("train %s ended %v; evaluate started %v", tr.State, tr.Ended, ev.Started)
	}
	if b, _ := os.ReadFile(filepath.Join(state, evaluate+".out")); !strings.HasSuffix(string(b), "is met\nevaluated\n") {
		t.Errorf("evaluate's output:\n%s", b)
	}
}
