package systest

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The other user of the cluster squats the job's default folders before
// the job runs (a folder of theirs, a symbolic link, one open to all):
// the job runs all the same, here, over ssh and under Slurm, and says
// once per host where its system logs went. Squatted in folders of the
// test's own, never in the real /tmp: TMPDIR, HOME or MONARCH_SYSLOG_DIR
// point there (MONARCH_* reach the ssh sessions; TMPDIR does not), and on
// h1 and h2 that folder is a disk of the host's own (HostTmpfs), so that
// the launcher here finds its own folder free and each host's agent finds
// its host's squatted.

// squatRoom makes a folder under /tmp open to all and sticky, as /tmp is,
// where the other user can squat; removed when t ends. With hosts, each
// of them gets a disk of its own there, alike.
func squatRoom(t *testing.T, c *testcluster.Cluster, hosts ...string) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "monarch-squat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		c.HostTmpfs(t, h, d, "4m")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := c.SSH(ctx, h, "chmod", "1777", d).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("chmod on %s: %v: %s", h, err, out)
		}
	}
	return d
}

// squat runs script (sh, $1 = dir) as the other user on host.
func squat(t *testing.T, c *testcluster.Cluster, host, script, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := c.AsOther(ctx, host, "sh", "-c", script, "sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("as %s on %q: %s: %v: %s", c.Other.Name, host, script, err, out)
	}
}

// Ways to squat a folder $1/root.
const (
	squatTheirs  = `mkdir -m 0755 "$1/root"`
	squatLink    = `ln -s /tmp "$1/root"`
	squatOpen    = `mkdir -m 0777 "$1/root" && chmod 0777 "$1/root"`
	squatRecords = `mkdir -m 0755 "$1/.monarch"`
)

// squatJob writes an SPMD job of one proc per host over hosts.
func squatJob(t *testing.T, hosts string) string {
	t.Helper()
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	return testenv.WriteFile(t, dir, "job.toml", "hosts = \"hosts.toml\"\n\n[spmd]\ncommand = [\"sh\", \"-c\", \"echo rank $RANK ran\"]\n\n[procs]\ngpus = 1\n")
}

// checkSquatRun checks a run of a squatJob: done, every proc ran, and for
// each host (as its hostname names it) one line saying where its system
// logs went instead of squatted, a fresh folder beside it.
func checkSquatRun(t *testing.T, out, stderr string, code, procs int, squatted string, hosts ...string) {
	t.Helper()
	if code != 0 || strings.Count(out, " ran\n") != procs {
		t.Fatalf("exit %d, want 0 and %d procs run\nstdout:\n%s\nstderr:\n%s", code, procs, out, stderr)
	}
	for _, h := range hosts {
		said := regexp.MustCompile(`(?m)^monarch: system logs on ` + regexp.QuoteMeta(h) + ` go to ` + regexp.QuoteMeta(squatted) + `\.\d+ instead: unsafe path: .+$`)
		if n := len(said.FindAllString(stderr, -1)); n != 1 {
			t.Errorf("%d lines say where %s's system logs went, want 1:\n%s", n, h, stderr)
		}
	}
	if n := strings.Count(stderr, "system logs on "); n != len(hosts) {
		t.Errorf("%d lines say where system logs went, want %d:\n%s", n, len(hosts), stderr)
	}
}

// Here: the system log folder ($TMPDIR/$USER) is theirs, and so is the
// folder of the state dir ($HOME/.monarch): the launcher says where both
// went, once, and every process of the job (client, agents, procs) uses
// the same.
func TestSquattedFoldersLocal(t *testing.T) {
	c := testcluster.Get(t)
	d := squatRoom(t, c)
	squat(t, c, "", squatTheirs+" && "+squatRecords, d)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	job := squatJob(t, "scheduler = \"local\"\n[local]\nhosts = 2\n")
	out, stderr, code := runMonarch(t, c, 2*time.Minute, []string{"TMPDIR=" + d, "HOME=" + d, "USER=" + me.Username,
		"MONARCH_SYSLOG_DIR=", "MONARCH_STATE_DIR="}, "run", job)
	host, _ := os.Hostname()
	checkSquatRun(t, out, stderr, code, 2, filepath.Join(d, me.Username), host)
	m := regexp.MustCompile(`(?m)^monarch: this job's records go to (` + regexp.QuoteMeta(d) + `/jobs\.\d+) instead \(MONARCH_STATE_DIR=\S+ monarch status shows it\): unsafe path: ` +
		regexp.QuoteMeta(filepath.Join(d, ".monarch")) + `, above .+ belongs to uid \d+`).FindStringSubmatch(stderr)
	if m == nil || strings.Count(stderr, "records go to") != 1 {
		t.Fatalf("no one line saying where the job's records went:\n%s", stderr)
	}
	if recs, _ := filepath.Glob(filepath.Join(m[1], "*.json")); len(recs) != 1 {
		t.Errorf("records in %s: %v, want the job's", m[1], recs)
	}
	for _, f := range []string{filepath.Join(d, me.Username), filepath.Join(d, ".monarch")} {
		if entries, err := os.ReadDir(f); err != nil || len(entries) != 0 {
			t.Errorf("%s, the other user's: %v, %v; want it left empty", f, entries, err)
		}
	}
}

// Over ssh: h1's folder is a link, h2's open to all.
func TestSquattedFoldersSSH(t *testing.T) {
	c := testcluster.Get(t)
	d := squatRoom(t, c, "h1", "h2")
	squat(t, c, "h1", squatLink, d)
	squat(t, c, "h2", squatOpen, d)
	job := squatJob(t, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig))
	out, stderr, code := runMonarch(t, c, 2*time.Minute, []string{"MONARCH_SYSLOG_DIR=" + filepath.Join(d, "root")}, "run", job)
	checkSquatRun(t, out, stderr, code, 2, filepath.Join(d, "root"), "h1", "h2")
}

// Under Slurm: h1's folder is theirs, h2's a link.
func TestSquattedFoldersSlurm(t *testing.T) {
	c := testcluster.Get(t)
	d := squatRoom(t, c, "h1", "h2")
	squat(t, c, "h1", squatTheirs, d)
	squat(t, c, "h2", squatLink, d)
	job := squatJob(t, slurmTwoHosts(c))
	out, stderr, code := runMonarch(t, c, 2*time.Minute, []string{"MONARCH_SYSLOG_DIR=" + filepath.Join(d, "root")}, "run", job)
	checkSquatRun(t, out, stderr, code, 2, filepath.Join(d, "root"), "h1", "h2")
}

// slurmTwoHosts is a hosts file for Slurm's two nodes, h1 and h2.
func slurmTwoHosts(c *testcluster.Cluster) string {
	return fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\ntime = \"00:05:00\"\n", c.Partition)
}
