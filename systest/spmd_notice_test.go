package systest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The notice an SPMD job's ranks get when the job is about to end: a
// real PyTorch loop (testdata/torch/checkpoint.py) that checkpoints on
// SIGUSR1 and on SIGTERM.

// startMonarch starts monarch with args in the test's state dir; it is
// killed at the end of the test if still running.
func startMonarch(t *testing.T, env []string, args ...string) (*exec.Cmd, *testenv.SyncBuffer, *testenv.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(filepath.Join(build(t), "monarch"), args...)
	cmd.Env = append(append(os.Environ(), "MONARCH_STATE_DIR="+stateDir(t)), env...)
	var stdout, stderr testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &stdout, &stderr
}

// waitExit waits (at most d) for cmd and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration, stderr *testenv.SyncBuffer) int {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running %v after the signal; stderr:\n%s", d, stderr.String())
	}
	return cmd.ProcessState.ExitCode()
}

// TestSPMDNoticeTorch: SIGUSR1 to monarch run (the time-limit warning)
// reaches every rank as SIGUSR1, and each writes its checkpoint while the
// job runs on; SIGTERM (a stop) then gives each rank SIGUSR1 again, and,
// half the stop grace later, SIGTERM: each checkpoints and exits.
func TestSPMDNoticeTorch(t *testing.T) {
	python, _ := requireTorch(t)
	script, err := filepath.Abs("testdata/torch/checkpoint.py")
	if err != nil {
		t.Fatal(err)
	}
	ckpt := t.TempDir()
	job := testenv.WriteFile(t, t.TempDir(), "job.toml", fmt.Sprintf("stop_grace = \"10s\"\n\n[spmd]\ncommand = [%q, %q]\n\n[procs]\ngpus = 2\n\n[env]\nCKPT_DIR = %q\n",
		python, script, ckpt))
	cmd, stdout, stderr := startMonarch(t, nil, "run", job)
	waitUntil(t, time.Minute, "both ranks ready", func() bool { return strings.Count(stdout.String(), " ready") == 2 })

	cmd.Process.Signal(syscall.SIGUSR1)
	waitUntil(t, 30*time.Second, "both ranks checkpointed on SIGUSR1", func() bool {
		return strings.Count(stdout.String(), "(SIGUSR1)") == 2
	})
	for r := range 2 {
		if _, err := os.Stat(filepath.Join(ckpt, fmt.Sprintf("rank%d.pt", r))); err != nil {
			t.Errorf("rank %d's checkpoint: %v", r, err)
		}
	}
	if !strings.Contains(stderr.String(), "monarch: job ending, time limit: SIGUSR1 sent to 2 of 2 ranks") {
		t.Errorf("the client does not say it passed the warning on:\n%s", stderr.String())
	}
	time.Sleep(500 * time.Millisecond)
	if cmd.ProcessState != nil || strings.Contains(stdout.String(), "stopping") {
		t.Fatalf("the warning stopped the job:\n%s\n%s", stdout.String(), stderr.String())
	}

	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	code := waitExit(t, cmd, time.Minute, stderr)
	out := stdout.String()
	t.Logf("SIGTERM to exit, notice first, SIGTERM half the 10s grace later: %v", time.Since(t0).Round(time.Millisecond))
	if code != 143 {
		t.Errorf("exit %d, want 143\n%s\n%s", code, out, stderr.String())
	}
	for r := range 2 {
		if got, want := rankEvents(out, r), "SIGUSR1 SIGUSR1 SIGTERM stopping"; got != want {
			t.Errorf("rank %d: %q, want %q (the warning's notice, the stop's, then SIGTERM):\n%s", r, got, want, out)
		}
	}
	if since := time.Since(t0); since < 4*time.Second {
		t.Errorf("SIGTERM came %v after the stop's notice, want half the 10s stop grace", since)
	}
}

// TestSPMDNoticeNotCaught: a rank that does not catch the notice signal
// is not sent it (its default action would end it): a warning leaves it
// running.
func TestSPMDNoticeNotCaught(t *testing.T) {
	cmd, stdout, stderr := startMonarch(t, nil, "local", "--procs", "gpus=2", "--", "sh", "-c", `echo "rank $RANK ready"; while :; do sleep 0.1; done`)
	waitUntil(t, time.Minute, "both ranks ready", func() bool { return strings.Count(stdout.String(), " ready") == 2 })
	cmd.Process.Signal(syscall.SIGUSR1)
	waitUntil(t, 30*time.Second, "the client passing the warning on", func() bool {
		return strings.Contains(stderr.String(), "sent to 0 of 2 ranks")
	})
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(stderr.String(), "failed") {
		t.Fatalf("a rank ended on the warning:\n%s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, 30*time.Second, stderr); code != 130 {
		t.Errorf("exit %d, want 130 after Ctrl-C\n%s", code, stderr.String())
	}
}

// rankEvents lists what rank r of checkpoint.py said, in order: why it
// checkpointed each time, and "stopping".
func rankEvents(out string, r int) string {
	var events []string
	prefix := fmt.Sprintf("rank %d ", r)
	for _, line := range strings.Split(out, "\n") {
		_, text, _ := strings.Cut(line, "] ")
		rest, ok := strings.CutPrefix(text, prefix)
		switch {
		case !ok:
		case rest == "stopping":
			events = append(events, rest)
		case strings.HasPrefix(rest, "checkpointed"):
			_, why, _ := strings.Cut(rest, "(")
			events = append(events, strings.TrimSuffix(why, ")"))
		}
	}
	return strings.Join(events, " ")
}

// TestSPMDNoticeSSH: on hosts of the test cluster (ssh), ranks run by
// the standalone host agents get the notice too, even a shell's trap
// (the agent must not leave SIGUSR1 ignored in what it starts).
func TestSPMDNoticeSSH(t *testing.T) {
	c := testcluster.Get(t)
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig))
	job := testenv.WriteFile(t, dir, "job.toml", `hosts = "hosts.toml"
[spmd]
command = ["sh", "-c", "trap 'echo rank $RANK noticed' USR1; echo rank $RANK ready; while :; do sleep 0.1; done"]
`)
	cmd, stdout, stderr := startMonarch(t, c.Env, "run", job)
	waitUntil(t, 2*time.Minute, "both ranks ready", func() bool { return strings.Count(stdout.String(), " ready") == 2 })
	cmd.Process.Signal(syscall.SIGUSR1)
	waitUntil(t, 30*time.Second, "both ranks noticed", func() bool { return strings.Count(stdout.String(), " noticed") == 2 })
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, time.Minute, stderr); code != 130 {
		t.Errorf("exit %d, want 130 after Ctrl-C\n%s", code, stderr.String())
	}
}

// TestSPMDSlurmTimeLimitTorch: under salloc with a 1-minute limit and
// signal_before = 50s, every rank of a PyTorch job on 2 Slurm nodes gets
// SIGUSR1 about 10 s in, checkpoints and leaves.
func TestSPMDSlurmTimeLimitTorch(t *testing.T) {
	c := testcluster.Get(t)
	python, _ := requireTorch(t)
	script, err := filepath.Abs("testdata/torch/checkpoint.py")
	if err != nil {
		t.Fatal(err)
	}
	dir, ckpt := t.TempDir(), t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"slurm\"\n[slurm]\nnodes = 2\npartition = %q\ntime = \"1\"\nsignal_before = \"50s\"\n", c.Partition))
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("hosts = \"hosts.toml\"\n[spmd]\ncommand = [%q, %q]\n[env]\nCKPT_DIR = %q\nEXIT_ON_NOTICE = \"1\"\n",
		python, script, ckpt))
	t0 := time.Now()
	out, stderr, code := runMonarch(t, c, 2*time.Minute, nil, "run", job)
	t.Logf("SPMD job under salloc --time=1, warned 50s ahead: ended after %v", time.Since(t0).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for r := range 2 {
		if got := rankEvents(out, r); got != "SIGUSR1" {
			t.Errorf("rank %d: %q, want one checkpoint on SIGUSR1:\n%s", r, got, out)
		}
		if _, err := os.Stat(filepath.Join(ckpt, fmt.Sprintf("rank%d.pt", r))); err != nil {
			t.Errorf("rank %d's checkpoint: %v", r, err)
		}
	}
}

// TestSPMDCtrlCNoNotice: Ctrl-C tears the job down at once: the ranks
// get SIGTERM, not the notice first.
func TestSPMDCtrlCNoNotice(t *testing.T) {
	python, _ := requireTorch(t)
	script, err := filepath.Abs("testdata/torch/checkpoint.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd, stdout, stderr := startMonarch(t, []string{"CKPT_DIR=" + t.TempDir()}, "local", "--procs", "gpus=2", "--", python, script)
	waitUntil(t, time.Minute, "both ranks ready", func() bool { return strings.Count(stdout.String(), " ready") == 2 })
	cmd.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, cmd, 30*time.Second, stderr); code != 130 {
		t.Errorf("exit %d, want 130\n%s", code, stderr.String())
	}
	for r := range 2 {
		if got := rankEvents(stdout.String(), r); got != "SIGTERM stopping" {
			t.Errorf("rank %d: %q, want SIGTERM alone:\n%s", r, got, stdout.String())
		}
	}
}
