package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

func TestMain(m *testing.M) {
	env := testenv.Setup()
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(env.Finish(code))
}

// lines returns the sorted non-empty lines of out.
func lines(out []byte) []string {
	var ls []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	slices.Sort(ls)
	return ls
}

// run runs cmd and returns stdout, stderr and the error, failing the test if
// it did not end within its context's deadline.
func run(t *testing.T, ctx context.Context, cmd *exec.Cmd) ([]byte, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not end in time (%v); stderr:\n%s", cmd.Args, ctx.Err(), stderr.String())
	}
	return stdout.Bytes(), stderr.String(), err
}

func TestCluster(t *testing.T) {
	c := testcluster.Get(t)
	if !slices.Equal(c.Hosts, []string{"h1", "h2"}) {
		t.Fatalf("Hosts = %v, want [h1 h2]", c.Hosts)
	}
	for _, p := range []string{c.SlurmConf, c.SSHConfig, c.SSHKey} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	if c.Advertise == "" || c.Partition != "debug" || !slices.Contains(c.Env, "SLURM_CONF="+c.SlurmConf) {
		t.Errorf("cluster = %+v", c)
	}
}

func TestSrunRunsOnBothHosts(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, stderr, err := run(t, ctx, c.Command(ctx, "srun", "-N2", "hostname"))
	if err != nil {
		t.Fatalf("srun -N2 hostname: %v\n%s", err, stderr)
	}
	if got := lines(out); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Fatalf("srun -N2 hostname printed %q, want h1 and h2", got)
	}
}

func TestSSH(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, stderr, err := run(t, ctx, c.SSH(ctx, "h2", "hostname"))
	if err != nil {
		t.Fatalf("ssh h2 hostname: %v\n%s", err, stderr)
	}
	if got := strings.TrimSpace(string(out)); got != "h2" {
		t.Fatalf("ssh h2 hostname printed %q, want h2", got)
	}

	// "lo" is this machine.
	me, _ := os.Hostname()
	out, stderr, err = run(t, ctx, c.SSH(ctx, "lo", "hostname"))
	if err != nil {
		t.Fatalf("ssh lo hostname: %v\n%s", err, stderr)
	}
	if got := strings.TrimSpace(string(out)); got != me {
		t.Fatalf("ssh lo hostname printed %q, want %q", got, me)
	}

	// From h1: h2 by name, and this machine's name resolves to Advertise.
	short, _, _ := strings.Cut(me, ".")
	out, stderr, err = run(t, ctx, c.SSH(ctx, "h1",
		"ssh -F "+c.SSHConfig+" h2 hostname && getent hosts "+short+" | cut -d' ' -f1"))
	if err != nil {
		t.Fatalf("ssh h1 (ssh h2; getent hosts %s): %v\n%s", short, err, stderr)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{"h2", c.Advertise}) {
		t.Fatalf("on h1: ssh h2 hostname, getent hosts %s printed %q, want [h2 %s]", short, got, c.Advertise)
	}
}

func TestSallocSrun(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, stderr, err := run(t, ctx, c.Command(ctx, "salloc", "-N2", "srun", "hostname"))
	if err != nil {
		t.Fatalf("salloc -N2 srun hostname: %v\n%s", err, stderr)
	}
	if got := lines(out); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Fatalf("salloc -N2 srun hostname printed %q, want h1 and h2", got)
	}
}

// Two steps at once in one allocation (one agent step, then more): the
// second needs --overlap, or it waits for the first to end.
func TestSrunOverlap(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	script := `srun --overlap -N2 sleep 30 & first=$!
sleep 1
timeout 15 srun --overlap -N2 hostname; rc=$?
kill $first; wait
exit $rc`
	out, stderr, err := run(t, ctx, c.Command(ctx, "salloc", "-N2", "bash", "-c", script))
	if err != nil {
		t.Fatalf("second srun --overlap step: %v\n%s", err, stderr)
	}
	if got := lines(out); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Fatalf("second step printed %q, want h1 and h2", got)
	}
}

// Requests Slurm can never satisfy fail at once (EnforcePartLimits=ALL)
// instead of pending forever.
func TestImpossibleRequestsFail(t *testing.T) {
	c := testcluster.Get(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-N3", "hostname"}, "Node count specification invalid"},
		{[]string{"-p", "nosuch", "hostname"}, "Invalid partition name"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, stderr, err := run(t, ctx, c.Command(ctx, "srun", tc.args...))
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("srun %v: err = %v, want a non-zero exit", tc.args, err)
		}
		if !strings.Contains(stderr, "srun: error:") || !strings.Contains(stderr, tc.want) {
			t.Errorf("srun %v: stderr %q, want Slurm's error %q", tc.args, stderr, tc.want)
		}
	}
}

func TestProcs(t *testing.T) {
	tag := "monarch-procs-" + strconv.Itoa(os.Getpid())
	// The tag goes into sleep's command line via a harmless argv[0].
	cmd := exec.Command("bash", "-c", "exec -a "+tag+" sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var procs []testcluster.Proc
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// until bash has exec'd sleep
		if procs = testcluster.Procs(tag); len(procs) == 1 && procs[0].Cmdline == tag+" 60" {
			break
		}
	}
	if len(procs) != 1 || procs[0].PID != cmd.Process.Pid || procs[0].Cmdline != tag+" 60" {
		t.Fatalf("Procs(%q) = %+v, want pid %d", tag, procs, cmd.Process.Pid)
	}

	// Killed but not reaped yet: a zombie, not listed.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if left := testcluster.WaitNoProcs(tag, 5*time.Second); left != nil {
		t.Fatalf("WaitNoProcs(%q) left %+v", tag, left)
	}
	cmd.Wait()

	// Never this process itself, whose command line may hold anything.
	if procs := testcluster.Procs(os.Args[0]); slices.ContainsFunc(procs, func(p testcluster.Proc) bool { return p.PID == os.Getpid() }) {
		t.Fatalf("Procs listed this process: %+v", procs)
	}
}

// TestOtherUser: AsOther runs as the unprivileged other user, on this
// machine and inside a host, and that user cannot do what root can (write
// root's private files, see a root-owned 0700 folder's entries).
func TestOtherUser(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.Other.Name == "" || c.Other.UID <= 0 {
		t.Fatalf("other user %+v", c.Other)
	}
	private := t.TempDir()
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"", "h2"} {
		out, stderr, err := run(t, ctx, c.AsOther(ctx, host, "sh", "-c", `id -u; id -g; hostname; ls "$1" 2>/dev/null && echo readable || echo refused`, "sh", private))
		if err != nil {
			t.Fatalf("on %q: %v: %s", host, err, stderr)
		}
		want := []string{strconv.Itoa(c.Other.UID), strconv.Itoa(c.Other.GID)}
		got := strings.Fields(string(out))
		if len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[3] != "refused" {
			t.Errorf("on %q: got %q, want uid %s gid %s, a hostname, refused", host, got, want[0], want[1])
		}
		if host != "" && got[2] != host {
			t.Errorf("hostname %q, want %q", got[2], host)
		}
	}
}
