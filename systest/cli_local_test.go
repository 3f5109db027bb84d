package systest

import (
	"testing"

	"github.com/monarch-go/monarch/internal/testenv"
)

// The simulated hosts of `monarch local JOB --hosts N` are real
// processes (monarch agent): the built binary runs them.
func TestCLILocalJobFlagsAfterTheFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	job := testenv.ShJob(t, dir, "echo agents=$MONARCH_HOST_AGENTS", "")
	for _, args := range [][]string{
		{"local", job, "--hosts", "3"},
		{"local", "--hosts", "3", job},
		{"local", "--hosts=3", "--", "/bin/sh", "-c", "echo agents=$MONARCH_HOST_AGENTS"},
		{"local", "--hosts", "3", "/bin/sh", "-c", "echo agents=$MONARCH_HOST_AGENTS"},
	} {
		out, stderr, code := monarch(t, args...)
		if code != 0 || out != "agents=3\n" {
			t.Errorf("monarch %q: exit %d, stdout %q, stderr %q; want agents=3", args, code, out, stderr)
		}
	}
}
