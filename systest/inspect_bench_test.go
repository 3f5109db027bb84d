package systest

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkStacksAndProfile: monarch stacks of a running job of 16 procs
// on 2 simulated hosts (with its client and a command proc), beside
// monarch version (the command's own start and exit), in ms; and a 5 s
// monarch profile of the same job beside the 5 s it was asked for.
func BenchmarkStacksAndProfile(b *testing.B) {
	b.Setenv("MONARCH_STATE_DIR", b.TempDir())
	run := startStacksJob(b, 2, 8)
	timed := func(args ...string) float64 {
		t0 := time.Now()
		if _, stderr, code := monarch(b, args...); code != 0 {
			b.Fatalf("monarch %v: exit %d: %s", args, code, stderr)
		}
		return float64(time.Since(t0).Microseconds()) / 1e3
	}
	var stacks, version []float64
	for range 7 {
		stacks = append(stacks, timed("stacks", run.job))
		version = append(version, timed("version"))
	}
	o, f := median(stacks), median(version)
	fmt.Printf("BENCH stacks-16procs-ms ours=%.1f floor=%.1f ratio=%.2f target<=10\n", o, f, o/f)
	out := filepath.Join(b.TempDir(), "job.pprof")
	p := timed("profile", run.job, "--seconds", "5", "-o", out)
	fmt.Printf("BENCH profile-5s-16procs-ms ours=%.0f floor=5000 ratio=%.3f target<=1.1\n", p, p/5000)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
