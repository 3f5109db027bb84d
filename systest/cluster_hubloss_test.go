package systest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// TestClusterHubServerKilled is TestRunHubServerKilled on the two ssh
// hosts of the test cluster: with [bus] hubs = 2, h1's agent runs the
// hub's second server and h2's leaf links to it; the client streams
// notes to a proc on h2, whose actors pass each on to all. The test kills
// h1's agent (SIGKILL) mid-stream: h2's leaf must move to the launcher's
// server, every note must reach every actor once and in order, and the
// job must end well.
func TestClusterHubServerKilled(t *testing.T) {
	c := testcluster.Get(t)
	dir := t.TempDir()
	prog := filepath.Join(dir, "hubloss")
	if out, err := exec.Command("go", "build", "-o", prog, "./testprogs/hubloss").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n[bus]\nhubs = 2\n", c.Hosts[0], c.Hosts[1], c.SSHConfig)
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [\"-for=8s\"]\nhosts = \"hosts.toml\"\n", prog))
	cmd, stderr, stdout := startRun(t, c, job)
	out, killed := killMidTraffic(t, cmd, stdout, stderr, c.Hosts[0], func() int {
		for _, p := range ourProcs("monarch agent") {
			if runs(t, p.Cmdline, filepath.Join(build(t), "monarch")) && strings.Contains(p.Cmdline, "--program ") &&
				strings.Contains(p.Cmdline, cachedAs(t, prog)+" ") && strings.Contains(p.Cmdline, "--index 0 ") {
				return p.PID
			}
		}
		t.Fatalf("no agent of %s running", c.Hosts[0])
		return 0
	})
	t.Logf("ended %v after the kill\n%s", time.Since(killed).Round(time.Millisecond), out)
	checkNothingLeft(t, prog)
}
