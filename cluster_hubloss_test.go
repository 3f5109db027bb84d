package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
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
	if out, err := exec.Command("go", "build", "-o", prog, "./internal/testprog/hubloss").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n[bus]\nhubs = 2\n", c.Hosts[0], c.Hosts[1], c.SSHConfig)
	writeFile(t, dir, "hosts.toml", hosts)
	job := writeFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [\"-for=8s\"]\nhosts = \"hosts.toml\"\n", prog))
	cmd, stderr, stdout := startRun(t, c, job)
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var out strings.Builder
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
	var agent int
	self := filepath.Join(build(t), "monarch") + " agent"
	for _, p := range testcluster.Procs(self) {
		if strings.HasPrefix(p.Cmdline, self) && strings.Contains(p.Cmdline, "--program "+prog) && strings.Contains(p.Cmdline, "--index 0 ") {
			agent = p.PID
		}
	}
	if agent == 0 {
		t.Fatalf("no agent of %s running", c.Hosts[0])
	}
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
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
		t.Fatalf("the job still ran 2 minutes after %s's agent was killed\n%s\n%s", c.Hosts[0], out.String(), stderr)
	}
	if err != nil || !strings.Contains(out.String(), "DELIVERED") {
		t.Fatalf("job: %v\n%s\n%s", err, out.String(), stderr)
	}
	t.Logf("ended %v after the kill\n%s", time.Since(killed).Round(time.Millisecond), out.String())
	checkNothingLeft(t, prog)
}
