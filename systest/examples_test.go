package systest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runExample runs an example under monarch local and returns its stdout
// and stderr; it fails the test if the example fails.
func runExample(t *testing.T, name string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(build(t), "monarch"), append([]string{"local", "--", filepath.Join(build(t), name)}, args...)...)
	cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// TestPipelineExample: a parser that panics on a poison batch and a summer
// told to crash are both restarted in place by their policies; the summer
// restores the checkpoint its Cleanup wrote, and the total counts every
// batch but the poison one (the example checks it and exits 1 otherwise).
func TestPipelineExample(t *testing.T) {
	dir := t.TempDir()
	out, errs := runExample(t, "pipeline", "-batches", "30", "-dir", dir)
	for _, want := range []string{"summer: restored ", "every batch but the poison one"} {
		if !strings.Contains(out, want) {
			t.Fatalf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, errs)
		}
	}
	for _, want := range []string{"mesh=parsers", "mesh=summer", "restarting in place"} {
		if !strings.Contains(errs, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "summer.json")); err != nil {
		t.Fatalf("the summer's last Cleanup left no checkpoint: %v", err)
	}
}

// TestControllerExample: 8 trainers whose Inits all ask for the job's
// controller at once get one (made once, owned by the client), take every
// shard from it exactly once, and the client finds it by name (the
// example checks the counts and exits 1 otherwise).
func TestControllerExample(t *testing.T) {
	out, errs := runExample(t, "controller", "-trainers", "8", "-shards", "100")
	if strings.Count(out, "controller: made once") != 1 || !strings.Contains(out, "the controller has 100 reports from 8 trainers") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out, errs)
	}
}
