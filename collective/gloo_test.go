package collective_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// PyTorch's gloo, run by testdata/torch/gloo_bench.py, is the floor of
// BenchmarkAllReduceVsGloo; TestGlooScript checks that script.

// requireTorch makes sure /usr/bin/python3 imports torch (installing it
// with testdata/torch/setup.sh as root), or skips saying why where it
// cannot be installed (a failure under MONARCH_REQUIRE_CLUSTER=1). It
// returns the python and gloo_bench.py.
func requireTorch(tb testing.TB) (python, script string) {
	tb.Helper()
	testenv.Require(tb, "PyTorch", "../testdata/torch/setup.sh")
	script, err := filepath.Abs("../testdata/torch/gloo_bench.py")
	if err != nil {
		tb.Fatal(err)
	}
	return "/usr/bin/python3", script
}

// glooSize is one size gloo_bench.py times: warmup untimed all-reduces of
// bytes, then reps timed ones.
type glooSize struct{ bytes, warmup, reps int }

// glooResult is what rank 0 printed for one size.
type glooResult struct {
	world, reps     int
	median, fastest float64   // seconds, the slowest rank's per repetition
	times           []float64 // every repetition's, in order
	sumOK           bool
}

var glooLine = regexp.MustCompile(`^GLOO bytes=(\d+) world=(\d+) reps=(\d+) median_s=(\S+) min_s=(\S+) sum_ok=([01]) all_s=(\S+)$`)

// runGloo runs world ranks of gloo_bench.py on this host over loopback,
// each in a process group of its own with one thread (OMP_NUM_THREADS=1),
// and returns rank 0's figures by size. Everything is bounded by timeout;
// a rank that fails ends the others, and every group is killed before it
// returns. A port taken between choosing it and binding it is retried
// once.
func runGloo(ctx context.Context, python, script string, world int, sizes []glooSize, timeout time.Duration) (map[int]glooResult, error) {
	res, stderr, err := runGlooOnce(ctx, python, script, world, sizes, timeout)
	if err != nil && strings.Contains(strings.ToLower(stderr), "address already in use") {
		res, stderr, err = runGlooOnce(ctx, python, script, world, sizes, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, stderr)
	}
	return res, nil
}

func runGlooOnce(ctx context.Context, python, script string, world int, sizes []glooSize, timeout time.Duration) (map[int]glooResult, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	port, err := testenv.FreePort()
	if err != nil {
		return nil, "", err
	}
	var args []string
	for _, s := range sizes {
		args = append(args, fmt.Sprintf("%d:%d:%d", s.bytes, s.warmup, s.reps))
	}
	var stdout bytes.Buffer
	var stderr testenv.SyncBuffer
	cmds := make([]*exec.Cmd, world)
	for r := range cmds {
		cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(world),
			"OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1",
			fmt.Sprintf("GLOO_BENCH_TIMEOUT=%d", int(timeout.Seconds())))
		if r == 0 {
			cmd.Stdout = &stdout
		}
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		cmds[r] = cmd
	}
	var pgids []int
	defer func() {
		// Whatever a rank left in its group goes with it.
		for _, pg := range pgids {
			syscall.Kill(-pg, syscall.SIGKILL)
		}
	}()
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			cancel()
			wg.Wait()
			return nil, stderr.String(), fmt.Errorf("gloo rank %d: %w", r, err)
		}
		pgids = append(pgids, cmd.Process.Pid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errs[r] = fmt.Errorf("gloo rank %d: %w", r, err)
				cancel() // the others would wait for it until their timeout
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return nil, stderr.String(), fmt.Errorf("gloo: not done in %v (killed)", timeout)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, stderr.String(), err
	}
	out := map[int]glooResult{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		m := glooLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		b, _ := strconv.Atoi(m[1])
		w, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		med, err1 := strconv.ParseFloat(m[4], 64)
		fast, err2 := strconv.ParseFloat(m[5], 64)
		var times []float64
		for _, f := range strings.Split(m[7], ",") {
			t, err := strconv.ParseFloat(f, 64)
			err1 = errors.Join(err1, err)
			times = append(times, t)
		}
		if err := errors.Join(err1, err2); err != nil || len(times) != n {
			return nil, stderr.String(), fmt.Errorf("gloo: %q: %d times, %v", line, len(times), err)
		}
		out[b] = glooResult{world: w, reps: n, median: med, fastest: fast, times: times, sumOK: m[6] == "1"}
	}
	for _, s := range sizes {
		if _, ok := out[s.bytes]; !ok {
			return nil, stderr.String(), fmt.Errorf("gloo: no figure for %d bytes in:\n%s", s.bytes, stdout.String())
		}
	}
	return out, stderr.String(), nil
}

// TestGlooScript: gloo_bench.py on 2 ranks at 1 KiB prints a figure that
// makes sense, from all-reduces that gave the right sums.
func TestGlooScript(t *testing.T) {
	python, script := requireTorch(t)
	res, err := runGloo(context.Background(), python, script, 2, []glooSize{{1024, 3, 20}}, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := res[1024]
	t.Logf("gloo, 2 ranks, 1 KiB: median %.1f µs, fastest %.1f µs", r.median*1e6, r.fastest*1e6)
	if r.world != 2 || r.reps != 20 || !r.sumOK {
		t.Errorf("got %+v, want world 2, 20 repetitions, right sums", r)
	}
	if !(r.fastest > 0 && r.fastest <= r.median && r.median < 1) {
		t.Errorf("got %+v, want 0 < fastest <= median < 1 s", r)
	}
	if m := median(r.times); m != r.median || slices.Min(r.times) != r.fastest {
		t.Errorf("got %+v: median %v and fastest %v of every time, want the figures printed", r, m, slices.Min(r.times))
	}
}
