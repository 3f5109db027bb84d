package systest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/testcluster"
)

// The binaries a job needs reach hosts that do not have them. The program
// and monarch here exist only on the launcher's side: the launcher runs
// in a mount namespace of its own with a tmpfs on a directory the hosts
// see empty. Each host keeps its cache on a tmpfs of its own mount
// namespace (testcluster.HostTmpfs), as on a local disk: what one host
// received, the other has not.

// shipSetup is a launcher-only copy of monarch and the multihost
// program, and a cache dir private to each host.
type shipSetup struct {
	c     *testcluster.Cluster
	stage string // the binaries, as the launcher's tmpfs gets them
	lo    string // the launcher's tmpfs: the paths the job names
	cache string // each host's own cache
}

func newShipSetup(t *testing.T, c *testcluster.Cluster, cacheSize map[string]string) *shipSetup {
	t.Helper()
	s := &shipSetup{c: c, stage: t.TempDir(), lo: t.TempDir(), cache: t.TempDir()}
	for _, name := range []string{"monarch", "multihost"} {
		data, err := os.ReadFile(filepath.Join(build(t), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.stage, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range c.Hosts {
		size := cacheSize[h]
		if size == "" {
			size = "256m"
		}
		c.HostTmpfs(t, h, s.cache, size)
	}
	return s
}

// run runs `monarch args...` as the launcher-only monarch, in its mount
// namespace, with env added.
func (s *shipSetup) run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	script := `set -e
mount -t tmpfs -o size=256m tmpfs "$1"
cp "$2"/* "$1"/
lo=$1
shift 2
exec "$lo/monarch" "$@"`
	argv := append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", s.lo, s.stage}, args...)
	return runOnCluster(t, s.c, 3*time.Minute, env, argv...)
}

// entry is the cached copy of the staged binary name, and its sum.
func (s *shipSetup) entry(t *testing.T, name string) (string, string) {
	t.Helper()
	b, err := bincache.Open(filepath.Join(s.stage, name))
	if err != nil {
		t.Fatal(err)
	}
	return bincache.Entry(s.cache, b), b.Sum
}

// onHost runs a shell command on host (over ssh: in its mount namespace).
func (s *shipSetup) onHost(t *testing.T, host, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.c.SSH(ctx, host, cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("on %s: %s: %v: %s", host, cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}

// cached checks every host has the staged binary name in its cache, as
// it is, and returns each copy's identity (inode and change time): the
// same after a run that sent nothing.
func (s *shipSetup) cached(t *testing.T, name string) map[string]string {
	t.Helper()
	e, sum := s.entry(t, name)
	ids := map[string]string{}
	for _, h := range s.c.Hosts {
		out := s.onHost(t, h, fmt.Sprintf("sha256sum %s && stat -c '%%i %%Z %%a' %s", e, e))
		lines := strings.Split(out, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], sum+" ") || !strings.HasSuffix(lines[1], " 500") {
			t.Fatalf("%s's copy of %s: %s", h, name, out)
		}
		ids[h] = lines[1]
	}
	return ids
}

// checkGone fails if a process of this run whose command line holds
// substr (the test's own cache or job dir: other tests' jobs may run
// meanwhile) is still running 10 s after the job ended.
func checkGone(t *testing.T, substr string) {
	t.Helper()
	if left := waitNoneOurs(substr, 10*time.Second); len(left) > 0 {
		t.Errorf("still running 10s after the job ended: %v", left)
	}
}

// sentLines are the launcher's lines saying what it sent.
func sentLines(stderr string) []string {
	var sent []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "monarch: sent ") {
			sent = append(sent, l)
		}
	}
	return sent
}

// checkSent checks the launcher said it sent exactly want (one pattern
// per binary sent).
func checkSent(t *testing.T, stderr string, want ...string) {
	t.Helper()
	sent := sentLines(stderr)
	ok := len(sent) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = regexp.MustCompile(want[i]).MatchString(sent[i])
	}
	if !ok {
		t.Fatalf("sent %q, want %q\nstderr:\n%s", sent, want, stderr)
	}
	for _, l := range sent {
		t.Log(l)
	}
}

// checkUnseen checks the hosts cannot see the launcher's binaries.
func (s *shipSetup) checkUnseen(t *testing.T) {
	t.Helper()
	for _, h := range s.c.Hosts {
		if out := s.onHost(t, h, fmt.Sprintf("ls -A %s | wc -l", s.lo)); out != "0" {
			t.Fatalf("%s sees %d files in the launcher's %s", h, len(out), s.lo)
		}
	}
}

// grow changes the staged binary name (a few bytes after its end: it runs
// as before).
func (s *shipSetup) grow(t *testing.T, name string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(s.stage, name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "changed %d", time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
}

// corrupt overwrites host's cached copy of the staged binary name.
func (s *shipSetup) corrupt(t *testing.T, host, name string) {
	t.Helper()
	e, _ := s.entry(t, name)
	s.onHost(t, host, fmt.Sprintf("chmod u+w %s && printf 'not the program' >%s", e, e))
}

// shipRuns is the sequence both schedulers pass: by (ssh, sbcast), with
// hosts the hosts file's lines before [ship].
func shipRuns(t *testing.T, c *testcluster.Cluster, by, hosts string) {
	s := newShipSetup(t, c, nil)
	job := clusterJob(t, filepath.Join(s.lo, "multihost"), fmt.Sprintf("%s[ship]\ncache = %q\n", hosts, s.cache), "gpus = 4")
	both := `h1,h2 by ` + by + ` in`
	run := func(what string) string {
		t.Helper()
		start := time.Now()
		out, stderr, code := s.run(t, nil, "run", job)
		if code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, code, out, stderr)
		}
		checkTrainers(t, c, out)
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
		return stderr
	}

	stderr := run("first run: both binaries sent")
	s.checkUnseen(t)
	checkSent(t, stderr, `^monarch: sent monarch \(`+s.lo+`/monarch\) \(\d+\.\d MB, sha256 [0-9a-f]{12}\) to `+both,
		`^monarch: sent program multihost \(`+s.lo+`/multihost\) \(\d+\.\d MB, sha256 [0-9a-f]{12}\) to `+both)
	monarchIDs, programIDs := s.cached(t, "monarch"), s.cached(t, "multihost")

	checkSent(t, run("same binaries: nothing sent"))
	if ids := s.cached(t, "monarch"); fmt.Sprint(ids) != fmt.Sprint(monarchIDs) {
		t.Errorf("monarch's cached copies changed: %v, then %v", monarchIDs, ids)
	}
	if ids := s.cached(t, "multihost"); fmt.Sprint(ids) != fmt.Sprint(programIDs) {
		t.Errorf("the program's cached copies changed: %v, then %v", programIDs, ids)
	}

	s.grow(t, "multihost")
	checkSent(t, run("program changed: sent again, monarch not"), `^monarch: sent program multihost .* to `+both)
	s.cached(t, "multihost")

	s.corrupt(t, "h2", "multihost")
	stderr = run("h2's copy corrupted: refused, sent again")
	refused := regexp.MustCompile(`(?m)^monarch: h2: the cached copy of program multihost \(` + s.lo + `/multihost\) fails its checksum \(sha256 [0-9a-f]{12}, not [0-9a-f]{12}\): refused; sending it again$`)
	if !refused.MatchString(stderr) {
		t.Fatalf("no refusal of h2's copy:\n%s", stderr)
	}
	want := `^monarch: sent program multihost .* to h2 by ssh in`
	if by == "sbcast" {
		want = `^monarch: sent program multihost .* to ` + both // sbcast sends to every node
	}
	checkSent(t, stderr, want)
	s.cached(t, "multihost")
	checkGone(t, s.cache)
}

// TestShipSSH: a program and a monarch only the launcher has run on both
// hosts over ssh; a second run sends nothing, a changed program is sent
// again, a corrupted copy is refused and replaced.
func TestShipSSH(t *testing.T) {
	c := testcluster.Get(t)
	shipRuns(t, c, "ssh", fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig))
}

// TestShipSlurm: the same with sbcast, inside the allocation salloc gets.
func TestShipSlurm(t *testing.T) {
	c := testcluster.Get(t)
	shipRuns(t, c, "sbcast", slurmShipHosts(c))
}

func slurmShipHosts(c *testcluster.Cluster) string {
	return fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\ntime = \"00:05:00\"\n", c.Partition)
}

// TestShipSSHDiskFull: a host whose cache cannot hold the binary (h2's
// is a 1 MiB tmpfs) refuses it twice, and the job fails naming the host,
// the binary and the host's own words, before any agent starts.
func TestShipSSHDiskFull(t *testing.T) {
	c := testcluster.Get(t)
	s := newShipSetup(t, c, map[string]string{"h2": "1m"})
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n[ship]\ncache = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig, s.cache)
	job := clusterJob(t, filepath.Join(s.lo, "multihost"), hosts, "gpus = 1")
	out, stderr, code := s.run(t, nil, "run", job)
	if code == 0 {
		t.Fatalf("exit 0\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
	again := regexp.MustCompile(`(?m)^monarch: h2: could not store monarch \(` + s.lo + `/monarch\) in the cache: .*No space left on device: refused; sending it again$`)
	final := regexp.MustCompile(`(?m)^monarch: launch: ssh h2: could not store monarch \(` + s.lo + `/monarch\) in the cache: .*No space left on device \(sent twice\)$`)
	if !again.MatchString(stderr) || !final.MatchString(stderr) || strings.Contains(stderr, "hosts up") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	t.Logf("exit %d:\n%s", code, stderr)
	checkGone(t, s.cache)
}

// TestShipSlurmNoFallback: without sbcast the nodes copy the binaries
// from their paths (a shared filesystem's, in folders of the user's), and
// a job whose nodes lack them fails before any agent starts, saying what
// is missing where and what to do; so does one whose sbcast fails. Nothing
// runs from a path unchecked.
func TestShipSlurmNoFallback(t *testing.T) {
	c := testcluster.Get(t)
	bin := build(t)

	// PATH without sbcast: every other command of the machine's PATH.
	farm := t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		files, _ := os.ReadDir(dir)
		for _, f := range files {
			if f.Name() != "sbcast" {
				os.Symlink(filepath.Join(dir, f.Name()), filepath.Join(farm, f.Name())) // the first of a name wins
			}
		}
	}
	if _, err := exec.LookPath(filepath.Join(farm, "srun")); err != nil {
		t.Fatalf("no srun in the PATH farm: %v", err)
	}
	job := clusterJob(t, filepath.Join(bin, "multihost"), slurmShipHosts(c)+fmt.Sprintf("[ship]\ncache = %q\n", t.TempDir()), "gpus = 4")
	out, stderr, code := runOnCluster(t, c, 3*time.Minute, []string{"PATH=" + farm}, filepath.Join(bin, "monarch"), "run", job)
	if code != 0 {
		t.Fatalf("auto: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	checkTrainers(t, c, out)
	if len(sentLines(stderr)) != 0 {
		t.Fatalf("sent %q without sbcast; stderr:\n%s", sentLines(stderr), stderr)
	}
	checkGone(t, filepath.Dir(job))

	// send = true: the nodes lack the binaries in their (new) cache.
	job = clusterJob(t, filepath.Join(bin, "multihost"), slurmShipHosts(c)+fmt.Sprintf("[ship]\nsend = true\ncache = %q\n", t.TempDir()), "gpus = 4")
	out, stderr, code = runOnCluster(t, c, 3*time.Minute, []string{"PATH=" + farm}, filepath.Join(bin, "monarch"), "run", job)
	lack := regexp.MustCompile(`(?m)^monarch: launch: slurm: sbcast is not in PATH, and h1,h2 lack monarch \(` + bin + `/monarch\), h1,h2 lack program multihost \(` +
		bin + `/multihost\): put sbcast in PATH, or the binaries at ` + bin + `/monarch, ` + bin + `/multihost on every node, in folders only you can write, to be copied from there$`)
	if code == 0 || !lack.MatchString(stderr) || strings.Contains(stderr, "hosts up") {
		t.Fatalf("send = true without sbcast: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	t.Logf("no sbcast: %s", lack.FindString(stderr))
	checkGone(t, filepath.Dir(job))

	// sbcast fails: h2's cache holds 1 MiB. The launcher's binaries are
	// not on the nodes: the job fails before the agents' step.
	s := newShipSetup(t, c, map[string]string{"h2": "1m"})
	job = clusterJob(t, filepath.Join(s.lo, "multihost"), slurmShipHosts(c)+fmt.Sprintf("[ship]\ncache = %q\n", s.cache), "gpus = 1")
	out, stderr, code = s.run(t, nil, "run", job)
	failed := regexp.MustCompile(`(?m)^monarch: launch: slurm: sbcast monarch failed \(exit status \d+: .*\), to ` + s.cache + `/[0-9a-f]{64}/\.monarch\.[0-9-]+\.part on h1,h2 \(h1,h2 lack monarch \(` +
		s.lo + `/monarch\)\): set \[ship\] cache in the hosts file to a folder with room for it on every node$`)
	if code == 0 || !failed.MatchString(stderr) || strings.Contains(stderr, "cannot run") || strings.Contains(stderr, "hosts up") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	t.Logf("sbcast failed: %s", failed.FindString(stderr))
	checkGone(t, s.cache)
}
