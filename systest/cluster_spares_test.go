package systest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// TestClusterLostAgentSlots runs testprogs/spares on the test cluster's
// two hosts, over ssh and over Slurm: a proc mesh with a spare per host,
// two meshes with restart policies, h2's host agent killed. The loss of
// one agent leaves the other host running under either scheduler (an
// agent per ssh session; over Slurm, a task of the agents' step, which
// runs with --kill-on-bad-exit=0), so with WithSparesAnyHost both meshes'
// member 1 answers again from h1 (its spare), with the slot's RANK;
// without, the owner is told of each, its restart failed as its host is
// gone, naming h2. Nothing is left after the job.
func TestClusterLostAgentSlots(t *testing.T) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "spares")
	schedulers := map[string]string{
		"ssh":   fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig),
		"slurm": slurmHosts(2),
	}
	for _, sched := range []string{"ssh", "slurm"} {
		for _, anyHost := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/anyhost=%v", sched, anyHost), func(t *testing.T) {
				dir := t.TempDir()
				testenv.WriteFile(t, dir, "hosts.toml", schedulers[sched])
				job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [\"-anyhost=%v\"]\nhosts = \"hosts.toml\"\n\n[procs]\ngpus = 1\n", program, anyHost))
				out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", job)
				t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr)
				if code != 0 {
					t.Fatalf("exit %d", code)
				}
				for _, mesh := range []string{"spare-a", "spare-b"} {
					if anyHost {
						moved := regexp.MustCompile(`(?m)^MOVED ` + mesh + ` (\S+) \d+ 1$`).FindStringSubmatch(out)
						if moved == nil || moved[1] != c.Hosts[0] {
							t.Errorf("%s's member 1: %v; want it on %s (its spare), RANK 1", mesh, moved, c.Hosts[0])
						}
						continue
					}
					told := regexp.MustCompile(`(?m)^TOLD ` + mesh + ` (.*)$`).FindStringSubmatch(out)
					if told == nil || !strings.Contains(told[1], "its restart failed") || !strings.Contains(told[1], c.Hosts[1]) {
						t.Errorf("%s's owner was told %v; want its restart failed, naming %s", mesh, told, c.Hosts[1])
					}
				}
				checkNothingLeft(t, program)
			})
		}
	}
}
