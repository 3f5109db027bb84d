package systest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// A job's [env] holds secrets (WANDB_API_KEY, HF_TOKEN): while the job
// runs, the other user of the cluster reads every command line on this
// machine, h1 and h2 (ps, and every /proc/*/cmdline it may read), and
// finds none of its values, while every proc sees the variable. Run
// locally (simulated hosts), over ssh and under Slurm (salloc, and sbatch
// with --detach).

// envJob writes an SPMD job over hosts (a hosts file's text) whose [env]
// holds a fresh secret: each proc prints a hash of the value it sees, then
// waits for the file done. It returns the job file, the secret and the
// line each proc prints when it sees the right value. The procs' command
// lines end with the secret's tag, for checkNothingLeft.
func envJob(t *testing.T, hosts string) (job, secret, seen, done string) {
	t.Helper()
	dir := t.TempDir()
	b := make([]byte, 16)
	rand.Read(b)
	secret = "ENVSECRET-" + hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(secret))
	seen = "sees " + hex.EncodeToString(sum[:8])
	done = filepath.Join(dir, "done")
	// printf is the shell's own: the value is on no command line here
	// either, only piped to sha256sum.
	script := `h=$(printf %s "$MY_SECRET" | sha256sum | cut -c1-16); echo "rank $RANK sees $h"; while [ ! -e "$DONE" ]; do sleep 0.2; done # ` + envTag(secret)
	testenv.WriteFile(t, dir, "hosts.toml", hosts)
	job = testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("hosts = \"hosts.toml\"\n\n[spmd]\ncommand = [\"sh\", \"-c\", %q]\n\n[procs]\ngpus = 1\n\n[env]\nMY_SECRET = %q\nDONE = %q\n",
		script, secret, done))
	return job, secret, seen, done
}

// readCommandLines is what the other user reads of the processes of a
// host: ps's command lines, those of /proc, and how many environments of
// monarch's processes it could read (none: an environment is its owner's
// to read).
const readCommandLines = `ps -eww -o args; echo '== /proc'; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' '; echo; ` +
	`echo "== environments read: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c '^MONARCH_')"`

// checkNoSecretInArgs reads, as the other user on this machine, h1 and h2,
// every command line it can, and fails if secret is in one; or if it
// cannot see the job's agents (nothing would then show the test works).
func checkNoSecretInArgs(t *testing.T, c *testcluster.Cluster, secret string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, host := range []string{"", "h1", "h2"} {
		out, err := c.AsOther(ctx, host, "sh", "-c", readCommandLines).CombinedOutput()
		if err != nil {
			t.Fatalf("as %s on %q: %v: %s", c.Other.Name, host, err, out)
		}
		s := string(out)
		if !strings.Contains(s, " agent --job ") {
			t.Fatalf("as %s on %q: no host agent among the command lines read: the check cannot tell\n%s", c.Other.Name, host, s)
		}
		if i := strings.Index(s, secret); i >= 0 {
			// The command line around it, at most 200 bytes either side.
			from, to := max(i-200, strings.LastIndex(s[:i], "\n")+1), min(i+len(secret)+200, len(s))
			if nl := strings.IndexByte(s[i:to], '\n'); nl >= 0 {
				to = i + nl
			}
			t.Errorf("as %s on %q: the [env] value is on a command line: ...%s...", c.Other.Name, host, s[from:to])
		}
		if !strings.Contains(s, "== environments read: 0\n") {
			t.Errorf("as %s on %q: read environments of monarch's processes: %s", c.Other.Name, host, s[strings.Index(s, "== environments"):])
		}
	}
}

// runEnvJob runs job with the monarch run arguments args, waits until its
// procs of n hosts have seen the secret, reads the command lines, then
// lets the job end. With capture, the hosts' links are recorded all along:
// the secret must not cross them in the clear either.
func runEnvJob(t *testing.T, c *testcluster.Cluster, n int, capture bool, args ...string) {
	t.Helper()
	job, secret, seen, done := envJob(t, args[len(args)-1])
	var caps []*testcluster.Capture
	if capture {
		for _, h := range c.Hosts {
			caps = append(caps, c.Capture(t, h))
		}
	}
	cmd, stdout, stderr := startMonarch(t, c.Env, append(args[:len(args)-1], job)...)
	waitUntil(t, 3*time.Minute, fmt.Sprintf("%d procs that see the secret", n), func() bool {
		return strings.Count(stdout.String(), seen) == n || strings.Count(stdout.String(), " sees ") > n || cmd.ProcessState != nil
	})
	if got := strings.Count(stdout.String(), seen); got != n {
		t.Fatalf("%d procs saw the [env] value, want %d\nstdout:\n%s\nstderr:\n%s", got, n, stdout.String(), stderr.String())
	}
	checkNoSecretInArgs(t, c, secret)
	os.WriteFile(done, nil, 0o600)
	if code := waitExit(t, cmd, 2*time.Minute, stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for i, cp := range caps {
		cp.Stop()
		if cp.Frames() == 0 {
			t.Errorf("nothing recorded on %s's link", c.Hosts[i])
		} else if cp.Contains([]byte(secret)) {
			t.Errorf("the [env] value crossed %s's link in the clear", c.Hosts[i])
		}
	}
	checkNothingLeft(t, envTag(secret))
}

// envTag names a secret's job without showing the secret.
func envTag(secret string) string {
	sum := sha256.Sum256([]byte("tag" + secret))
	return "envjob-" + hex.EncodeToString(sum[:6])
}

func TestEnvOffCommandLinesLocal(t *testing.T) {
	c := testcluster.Get(t)
	runEnvJob(t, c, 2, false, "run", "scheduler = \"local\"\n[local]\nhosts = 2\n")
}

func TestEnvOffCommandLinesSSH(t *testing.T) {
	c := testcluster.Get(t)
	runEnvJob(t, c, 2, false, "run", fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig))
}

// Under salloc: the step's agents get the token over their TLS links
// (MUNGE), the [env] sealed under it in the step's environment, which
// crosses the hosts' links in Slurm's RPCs, signed but not encrypted: the
// value must not show there either.
func TestEnvOffCommandLinesSlurm(t *testing.T) {
	c := testcluster.Get(t)
	runEnvJob(t, c, 2, true, "run", slurmTwoHosts(c))
}

// With --detach: sbatch runs monarch run on a node of the allocation.
func TestEnvOffCommandLinesSlurmDetached(t *testing.T) {
	c := testcluster.Get(t)
	job, secret, seen, done := envJob(t, slurmTwoHosts(c))
	out := filepath.Join(t.TempDir(), "job.out")
	id, _ := detachSlurm(t, c, job, "--output", out)
	var b []byte
	waitUntil(t, 3*time.Minute, "2 procs that see the secret", func() bool {
		b, _ = os.ReadFile(out)
		return strings.Count(string(b), seen) == 2 || strings.Count(string(b), " sees ") > 2
	})
	if got := strings.Count(string(b), seen); got != 2 {
		t.Fatalf("%d procs saw the [env] value, want 2:\n%s", got, b)
	}
	checkNoSecretInArgs(t, c, secret)
	os.WriteFile(done, nil, 0o600)
	waitSlurmStatus(t, c, id, "done")
	checkNothingLeft(t, envTag(secret))
}
