package systest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// TestLocalTLS: [bus] tls = true runs a job on this machine with TLS as
// a job across hosts would: the agents admitted over their TLS link, the
// leaves showing their certificates to the hub, or (leaf_nodes = false)
// every proc dialing the hub over TLS.
func TestLocalTLS(t *testing.T) {
	program := filepath.Join(build(t), "multihost")
	for _, leaves := range []bool{true, false} {
		t.Run(fmt.Sprintf("leaf_nodes=%v", leaves), func(t *testing.T) {
			dir := t.TempDir()
			testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"local\"\n[local]\nhosts = 2\n[bus]\ntls = true\nleaf_nodes = %v\n", leaves))
			job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nhosts = \"hosts.toml\"\n[procs]\ngpus = 2\n", program))
			out, stderr, code := localMonarch(t, 2*time.Minute, nil, "run", job)
			if code != 0 || strings.Count(out, "taking a step") != 4 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			checkNothingLeft(t, program)
		})
	}
}
