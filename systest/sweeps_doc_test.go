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
// on jobs" as written: evaluate waits for train and runs once it is done.
func TestSweepsDocAfter(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	script := docBlock(t, "docs/sweeps.md", "## Jobs that wait on jobs")
	cmd := exec.Command("/bin/sh", "-ec", script+`echo "$train $evaluate"`)
	cmd.Env = append(os.Environ(), "PATH="+build(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.Output()
	ids := strings.Fields(string(out))
	if err != nil || len(ids) != 2 {
		t.Fatalf("the example: %v: %q", err, out)
	}
	waitStatus(t, ids[0], map[string]string{"STATE": "done"})
	waitUntil(t, 30*time.Second, "evaluate to be done", func() bool { return record(t, ids[1]).State == "done" })
	if b, _ := os.ReadFile(filepath.Join(state, ids[1]+".out")); !strings.HasSuffix(string(b), "is met\nevaluated\n") {
		t.Errorf("evaluate's output:\n%s", b)
	}
}
