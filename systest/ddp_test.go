package systest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var ddpStep = regexp.MustCompile(`a step: (\S+) on (\d+) procs, (\S+) in one process`)

// runDDP runs examples/ddp under monarch local and returns its output.
func runDDP(t testing.TB, args ...string) string {
	t.Helper()
	bin := build(t) // before the run's time starts: a loaded machine builds slowly
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "monarch"), append([]string{"local", "--", filepath.Join(bin, "ddp")}, args...)...)
	cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+t.TempDir())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ddp: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestDDPExample: data-parallel training on dtensor on 4 procs (the
// client's rows scattered, gorgonia gradients averaged by the procs, Adam
// on the procs) ends at the loss of the same training in one process,
// within 1e-6 (the example checks it and fails otherwise).
func TestDDPExample(t *testing.T) {
	out := runDDP(t, "-steps", "60")
	if !strings.Contains(out, "after 60 steps on 4 procs: loss ") || !ddpStep.MatchString(out) {
		t.Fatalf("output:\n%s", out)
	}
	t.Log(strings.TrimSpace(out[strings.Index(out, "after "):]))
}

// BenchmarkDDPStep: one data-parallel step on 4 procs (dtensor's ops:
// the forward pass, the gradients, all-reduces among the procs, Adam's
// update, the loss fetched) beside the same step in one process, the two
// timed in alternating rounds of 20 steps (examples/ddp).
func BenchmarkDDPStep(b *testing.B) {
	out := runDDP(b, "-steps", "200")
	m := ddpStep.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("output:\n%s", out)
	}
	ours, err1 := time.ParseDuration(m[1])
	floor, err2 := time.ParseDuration(m[3])
	if err1 != nil || err2 != nil {
		b.Fatalf("step times %q %q", m[1], m[3])
	}
	procs, _ := strconv.Atoi(m[2])
	fmt.Printf("BENCH ddp-step-%dprocs-us ours=%.1f floor=%.1f ratio=%.2f target<=2.5\n", procs,
		float64(ours.Microseconds()), float64(floor.Microseconds()), float64(ours)/float64(floor))
}
