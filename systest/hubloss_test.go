package systest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/logagg"
)

// TestRunHubServerKilled runs a job on three simulated hosts whose hub is
// two servers: the launcher's and one in h0's agent, to which h1's leaf
// links (h2's links to the launcher's). While the client streams
// numbered notes to actors on h1 and h2, which pass each on to all of
// them as notes of their own, and spawns a mesh more every second, the
// test kills h0's agent (SIGKILL), and the hub server with it: h1's leaf
// must move to the launcher's server, no publish may stall for long, and
// every note must reach every actor, once and in order (the delivery
// layer resends what was lost in the dead server), and the job must end
// well.
func TestRunHubServerKilled(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "hubloss")
	if out, err := exec.Command("go", "build", "-o", prog, "./testprogs/hubloss").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 3\n[bus]\nhubs = 2\n")
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [\"-for=8s\"]\nhosts = \"hosts.toml\"\n", prog))
	cmd := exec.Command(filepath.Join(build(t), "monarch"), "run", job)
	logs := t.TempDir()
	cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+t.TempDir(), logagg.EnvSystemLogDir+"="+logs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	out, killed := killMidTraffic(t, cmd, stdout, &stderr, "h0", func() int { return localAgent(t, cmd.Process.Pid, 0) })
	// The fault was the one meant: h1's leaf lost its hub server and
	// linked to the other.
	h1, _ := filepath.Glob(filepath.Join(logs, "monarch_*_agent-h1.log"))
	var h1log []byte
	if len(h1) == 1 {
		h1log, _ = os.ReadFile(h1[0])
	}
	if !bytes.Contains(h1log, []byte("lost the link to the job's hub")) || !bytes.Contains(h1log, []byte("the link to the job's hub is back")) {
		t.Errorf("h1's agent (%v) did not log its leaf's move to another hub server:\n%s", h1, h1log)
	}
	t.Logf("ended %v after the kill\n%s\n%s", time.Since(killed).Round(time.Millisecond), out, stderr.String())
}

// killMidTraffic waits (bounded) for the started job's TRAFFIC line,
// lets the stream run a second, kills with SIGKILL the agent of host
// (agent finds its pid), and waits (bounded) for the job to end well,
// having printed DELIVERED. It returns the job's stdout and when the kill
// was.
func killMidTraffic(t *testing.T, cmd *exec.Cmd, stdout io.Reader, stderr fmt.Stringer, host string, agent func() int) (string, time.Time) {
	t.Helper()
	lines := make(chan string, 64)
	var out strings.Builder
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	traffic := time.After(2 * time.Minute)
	for started := false; !started; {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the job ended before its traffic began\n%s\n%s", out.String(), stderr)
			}
			out.WriteString(l + "\n")
			started = l == "TRAFFIC"
		case <-traffic:
			t.Fatalf("no traffic within 2 minutes\n%s\n%s", out.String(), stderr)
		}
	}
	time.Sleep(time.Second)
	if err := syscall.Kill(agent(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	done := make(chan error, 1)
	go func() {
		for l := range lines {
			out.WriteString(l + "\n")
		}
		done <- cmd.Wait()
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the job still ran 2 minutes after %s's agent was killed\n%s\n%s", host, out.String(), stderr)
	}
	if err != nil || !strings.Contains(out.String(), "DELIVERED") {
		t.Fatalf("job: %v\n%s\n%s", err, out.String(), stderr)
	}
	return out.String(), killed
}

// localAgent is the pid of the agent of simulated host index that the
// launcher launcher started.
func localAgent(t *testing.T, launcher, index int) int {
	t.Helper()
	for _, pid := range childrenOf(launcher) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[1] == "agent" && strings.Contains("\x00"+string(cmdline), "\x00--index\x00"+strconv.Itoa(index)+"\x00") {
			return pid
		}
	}
	t.Fatalf("no agent of host %d among the children of %d", index, launcher)
	return 0
}

// childrenOf lists the pids of parent's children.
func childrenOf(parent int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; read after ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(parent) {
			pids = append(pids, pid)
		}
	}
	return pids
}
