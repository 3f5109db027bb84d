package systest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The capture tests run a job across the cluster's two hosts while both
// hosts' links are recorded, and look in what crossed them for four
// secrets: the job's bus token, a string the client sends to every host
// as an argument, the line the hosts' procs log for it, and what a proc
// of one host reads from a one-sided buffer of the other's (by the
// buffer's TCP path, which follows the bus). With TLS (the
// default across hosts, no keys in the config) none may appear; the same
// job with [bus] tls = false must show all four, or the test could not
// fail.

// secretRun is what a capture run sent, and what its links carried.
type secretRun struct {
	token, arg, line, buffer string
	caps                     []*testcluster.Capture
	took                     time.Duration
}

// found lists which of the run's secrets the capture holds.
func (r *secretRun) found() []string {
	var out []string
	for _, s := range []struct{ name, v string }{{"the token", r.token}, {"the argument", r.arg}, {"the log line", r.line},
		{"the buffer's bytes", r.buffer}} {
		for _, cp := range r.caps {
			if cp.Contains([]byte(s.v)) {
				out = append(out, s.name)
				break
			}
		}
	}
	return out
}

// runSecret runs the secret program over hosts (a hosts file's text)
// while capturing every host's link.
func runSecret(t *testing.T, c *testcluster.Cluster, hosts string) *secretRun {
	t.Helper()
	prog := filepath.Join(t.TempDir(), "secret")
	if out, err := exec.Command("go", "build", "-o", prog, "./testprogs/secret").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	b := make([]byte, 24)
	rand.Read(b)
	r := &secretRun{arg: "ARG-" + hex.EncodeToString(b)}
	r.line = fmt.Sprintf("logged %x", sha256.Sum256([]byte(r.arg)))
	r.buffer = fmt.Sprintf("buffer %x", sha256.Sum256([]byte("buffer"+r.arg)))
	argFile, tokenFile := testenv.WriteFile(t, dir, "arg", r.arg), filepath.Join(dir, "token")
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	// The buffer's TCP path between hosts: on one machine its shared
	// memory path would be taken.
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [\"-token-file\", %q, \"-arg-file\", %q]\nhosts = \"hosts.toml\"\nenv = { MONARCH_RDMA_BACKEND = \"tcp\" }\n",
		prog, tokenFile, argFile))
	for _, h := range c.Hosts {
		r.caps = append(r.caps, c.Capture(t, h))
	}
	start := time.Now()
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", job)
	r.took = time.Since(start)
	for _, cp := range r.caps {
		cp.Stop()
	}
	if code != 0 || !strings.Contains(out, fmt.Sprintf("ECHOED %d", len(c.Hosts))) ||
		!strings.Contains(out, fmt.Sprintf("READ %d tcp,tcp", len(c.Hosts))) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil || len(token) < 16 {
		t.Fatalf("the client wrote no token (%q): %v", token, err)
	}
	r.token = string(token)
	for i, cp := range r.caps {
		if cp.Frames() == 0 {
			t.Fatalf("nothing recorded on %s's link", c.Hosts[i])
		}
	}
	checkNothingLeft(t, prog)
	return r
}

// checkSecrets runs the job with hosts (TLS by default) and with hosts
// plus [bus] tls = false.
func checkSecrets(t *testing.T, c *testcluster.Cluster, hosts, what string) {
	on := runSecret(t, c, hosts)
	if f := on.found(); len(f) > 0 {
		t.Errorf("%s with TLS: %s crossed the hosts' links in the clear", what, strings.Join(f, ", "))
	}
	off := runSecret(t, c, withTLSOff(hosts))
	if f := off.found(); len(f) != 4 {
		t.Errorf("%s with tls = false: only %v found in the capture: the test cannot tell", what, f)
	}
	// The first run of a test binary also sends monarch to the hosts.
	t.Logf("%s: monarch run with TLS %v, without %v", what, on.took.Round(time.Millisecond), off.took.Round(time.Millisecond))
}

// withTLSOff adds tls = false to hosts' [bus] table, or adds the table.
func withTLSOff(hosts string) string {
	if strings.Contains(hosts, "[bus]\n") {
		return strings.Replace(hosts, "[bus]\n", "[bus]\ntls = false\n", 1)
	}
	return hosts + "[bus]\ntls = false\n"
}

// TestSSHCaptureTLS: over ssh, with no TLS keys in the config.
func TestSSHCaptureTLS(t *testing.T) {
	c := testcluster.Get(t)
	checkSecrets(t, c, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig), "ssh")
}

// TestSlurmCaptureTLS: under Slurm (salloc, one srun step), with no TLS
// keys in the config. The capture holds srun's traffic to the hosts'
// slurmd too: with tls = false the token is found there, in the step's
// environment; with TLS the agents get it over their TLS link instead,
// once MUNGE proves they run as the job's user.
func TestSlurmCaptureTLS(t *testing.T) {
	c := testcluster.Get(t)
	checkSecrets(t, c, fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\ntime = \"00:05:00\"\n", c.Partition), "slurm")
}

// TestHubsCaptureTLS: over ssh with [bus] hubs = 2: h1's agent runs the
// hub's second server, h2's leaf links to one of the two, and the two
// servers route to each other over mutual TLS.
func TestHubsCaptureTLS(t *testing.T) {
	c := testcluster.Get(t)
	checkSecrets(t, c, fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n[bus]\nhubs = 2\n", c.Hosts[0], c.Hosts[1], c.SSHConfig), "hubs = 2")
}
