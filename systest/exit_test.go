package systest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// exitHostTimeout is the host timeout the exit tests give the job: long,
// so that an exit that waits for it, or a host declared lost at the end,
// stands out whatever the machine's load.
const exitHostTimeout = 20 * time.Second

// killExit is one run of testprogs/killexit, run directly on two
// simulated hosts: when its function returned, when the process ended,
// and what it wrote.
type killExit struct {
	returned, exited time.Time
	stdout, stderr   string
}

// runKillExit runs testprogs/killexit with args, directly (no launcher),
// on the two simulated hosts of a local hosts file in dir; it fails the
// test unless the job exits 0 within two minutes, having returned.
func runKillExit(t testing.TB, dir string, args ...string) killExit {
	t.Helper()
	prog := filepath.Join(build(t), "killexit")
	hosts := testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n")
	args = append([]string{"-host-timeout", exitHostTimeout.String()}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(os.Environ(), "MONARCH_HOSTS="+hosts)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := killExit{exited: time.Now(), stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		t.Fatalf("killexit %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, r.stdout, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if ns, ok := strings.CutPrefix(line, "RETURN "); ok {
			n, err := strconv.ParseInt(ns, 10, 64)
			if err != nil {
				t.Fatalf("killexit: %q: %v", line, err)
			}
			r.returned = time.Unix(0, n)
		}
	}
	if r.returned.IsZero() {
		t.Fatalf("killexit %v did not say when it returned\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	}
	return r
}

// TestExitAfterHandledKill: a job run directly on two simulated hosts,
// whose restart policy handled a SIGKILL of one of its procs, exits as
// soon as its function returns: in well under the host timeout, with no
// host taken for lost and no failure given to its fault hook. Also when
// it returns while the killed member's restart is on its way (just after
// the kill is seen, or while the new proc in the killed one's place is
// starting): the job's own stop then ends that restart, which is no fault
// of the program's.
func TestExitAfterHandledKill(t *testing.T) {
	dir := t.TempDir()
	for _, at := range []string{"restarted", "seen", "start", "start"} {
		r := runKillExit(t, dir, "-at="+at)
		took := r.exited.Sub(r.returned)
		t.Logf("returned at %s: exited %v later", at, took.Round(time.Millisecond))
		if took > exitHostTimeout/2 {
			t.Errorf("returned at %s: exited %v later; want well under the host timeout (%v)", at, took, exitHostTimeout)
		}
		for _, s := range []string{"host lost", "silent for", "unresponsive"} {
			if strings.Contains(r.stderr, s) {
				t.Errorf("returned at %s: a host or proc taken for lost at the end (%q):\n%s", at, s, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "FAULT ") {
			t.Errorf("returned at %s: the fault hook was called, for a kill the restart policy handled or at the job's own stop:\n%s", at, r.stderr)
		}
	}
}

// BenchmarkReturnToExit: from a directly-run job's return (after a
// SIGKILL of one of its procs that its restart policy handled) to the
// end of its process, beside the start and exit of a process that exits
// at once (/bin/true), in ms (medians of 5).
func BenchmarkReturnToExit(b *testing.B) {
	dir := b.TempDir()
	b.Setenv("MONARCH_STATE_DIR", b.TempDir())
	var ours, floor []float64
	for range 5 {
		r := runKillExit(b, dir, "-at=restarted")
		ours = append(ours, float64(r.exited.Sub(r.returned).Microseconds())/1e3)
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, float64(time.Since(t0).Microseconds())/1e3)
	}
	o, f := median(ours), median(floor)
	fmt.Printf("BENCH return-to-exit-2x2-ms ours=%.1f floor=%.1f ratio=%.1f target<=100\n", o, f, o/f)
}
