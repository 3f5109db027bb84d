package systest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/procstat"
)

// TestScale16Hosts runs the scale program on 16 simulated hosts x 4 procs
// x 4 actors (256 actors in 64 procs, 16 host agents): spawn, whole-mesh
// calls, a one-member slice, a broadcast flood counted exactly, a proc
// killed with SIGKILL reported to the mesh's owner, a clean exit, and no
// process left behind.
func TestScale16Hosts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the 16-host scale test takes a while")
	}
	bin := build(t)
	out, code, d := runScale(t, bin, scaleArgv(t, bin, 16, false, "-procs", "4", "-actors", "4", "-calls", "50", "-flood", "20000"))
	if code != 0 || !strings.Contains(out, "\nOK\n") {
		t.Fatalf("exit %d after %v:\n%s", code, d, out)
	}
	m := metrics(out)
	if m["procs"] != "64" || m["actors"] != "256" {
		t.Errorf("procs %s, actors %s: want 64 and 256", m["procs"], m["actors"])
	}
	t.Logf("16 hosts: spawn %ss, call p50 %sus, slice p50 %sus vs single %sus, flood %s deliveries/s, kill reported in %sms, %v in all",
		m["spawn-s"], m["call-p50-us"], m["slice-p50-us"], m["single-p50-us"], m["flood-deliveries-per-s"], m["kill-reported-ms"], d)
	if left := processesUnder(bin); len(left) > 0 {
		t.Errorf("processes left after the job: %v", left)
	}
}

// TestScaleDirect runs the scale program on 4 simulated hosts with no
// leaf nodes ([bus] leaf_nodes = false): every proc dials the hub.
func TestScaleDirect(t *testing.T) {
	bin := build(t)
	out, code, d := runScale(t, bin, scaleArgv(t, bin, 4, true, "-procs", "2", "-actors", "2", "-calls", "20", "-flood", "2000"))
	if code != 0 || !strings.Contains(out, "\nOK\n") {
		t.Fatalf("exit %d after %v:\n%s", code, d, out)
	}
	if m := metrics(out); m["procs"] != "8" || m["actors"] != "16" {
		t.Errorf("procs %s, actors %s: want 8 and 16", m["procs"], m["actors"])
	}
	if left := processesUnder(bin); len(left) > 0 {
		t.Errorf("processes left after the job: %v", left)
	}
}

// TestScaleInterestGrowsWithHosts: the subscriptions to proc subjects
// that the hub holds grow with the hosts, not with their procs: 4 hosts
// x 1 proc and 4 hosts x 8 procs leave 9 at the hub: each agent's, each
// leaf's prefix and the client's (the leaf delivers its procs' subjects itself).
func TestScaleInterestGrowsWithHosts(t *testing.T) {
	bin := build(t)
	t.Setenv("MONARCH_METRICS", "1")
	counts := map[int]map[string]string{}
	for _, procs := range []int{1, 8} {
		out, code, d := runScale(t, bin, scaleArgv(t, bin, 4, false, "-procs", strconv.Itoa(procs), "-actors", "1", "-calls", "5", "-flood", "100", "-kill=false"))
		if code != 0 || !strings.Contains(out, "\nOK\n") {
			t.Fatalf("4 x %d: exit %d after %v:\n%s", procs, code, d, out)
		}
		m := metrics(out)
		if m["procs"] != strconv.Itoa(4*procs) || m["hub-subs"] == "" {
			t.Fatalf("4 x %d: procs %q, hub-subs %q:\n%s", procs, m["procs"], m["hub-subs"], out)
		}
		counts[procs] = m
	}
	// Each host's agent subject and its procs' prefix, and the client's.
	if counts[1]["hub-proc-subs"] != "9" || counts[8]["hub-proc-subs"] != "9" {
		t.Errorf("proc subjects at the hub: %s at 4 x 1 (%s), %s at 4 x 8 (%s): want 9 (2 a host, the client's)", counts[1]["hub-proc-subs"], counts[1]["hub-proc-subjects"],
			counts[8]["hub-proc-subs"], counts[8]["hub-proc-subjects"])
	}
	t.Logf("hub subscriptions 4x1 %s, 4x8 %s (to proc subjects %s, %s); from the leaves %s, %s; told to the leaves %s, %s", counts[1]["hub-subs"], counts[8]["hub-subs"],
		counts[1]["hub-proc-subs"], counts[8]["hub-proc-subs"], counts[1]["hub-leaf-subs"], counts[8]["hub-leaf-subs"], counts[1]["leaves-learned"], counts[8]["leaves-learned"])
}

// scaleArgv is monarch's command line that runs the scale program with
// args on hosts simulated hosts: monarch local, or, direct, monarch run of
// a job whose hosts file says leaf_nodes = false.
func scaleArgv(t testing.TB, bin string, hosts int, direct bool, args ...string) []string {
	program := filepath.Join(bin, "scale")
	if !direct {
		return append([]string{"local", "--hosts", strconv.Itoa(hosts), "--", program}, args...)
	}
	dir := t.TempDir()
	hostsFile := filepath.Join(dir, "hosts.toml")
	job := filepath.Join(dir, "job.toml")
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = strconv.Quote(a)
	}
	for p, content := range map[string]string{
		hostsFile: fmt.Sprintf("scheduler = \"local\"\n[local]\nhosts = %d\n[bus]\nleaf_nodes = false\n", hosts),
		job:       fmt.Sprintf("program = %q\nargs = [%s]\nhosts = %q\n", program, strings.Join(quoted, ", "), hostsFile),
	} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"run", job}
}

// runScale runs monarch with argv (scaleArgv), bounded, and returns its
// output, exit status and run time.
func runScale(t *testing.T, bin string, argv []string) (string, int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "monarch"), argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("monarch %v did not finish within 8 minutes:\n%s", argv, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code, d
}

// metrics reads the "METRIC name value" lines of the scale program.
func metrics(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// A proc's lines come prefixed with its rank; the client's do not.
		if len(f) == 3 && f[0] == "METRIC" {
			m[f[1]] = f[2]
		}
	}
	return m
}

// processesUnder lists the processes whose program is in dir (waiting up
// to 5s for them to go: a killed process takes a moment).
func processesUnder(dir string) []string {
	var left []string
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
			if err == nil && strings.HasPrefix(exe, dir+string(os.PathSeparator)) {
				left = append(left, e.Name()+" "+filepath.Base(exe))
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			return left
		}
	}
}

// BenchmarkScale runs the scale program on simulated hosts x procs x 4
// actors: 1x4, 4x4, 16x4, 32x4, 64x4 and 128x2 (MONARCH_SCALE_SIZES
// overrides: "4,64" for 4x4 and 64x4, "128x2") and prints a line of
// figures per shape: spawn time and the machine's CPU seconds spent
// starting the procs, whole-mesh call p50/p99, a one-member slice's
// CallOne p50 beside a one-actor mesh's, broadcast deliveries per second,
// the exit time after the program returns, and the CPU share of the
// monarch process (which runs the hub; the leaves run in the host
// agents) and the subscriptions its hub server held at the peak. Then the BENCH lines: spawn time per proc at the largest shape
// of 4 procs a host against 4x4; at that shape a slice against a
// one-actor mesh, and the flood's time with no leaf nodes (direct: every
// proc dials the hub) against with leaves. make bench-scale runs it.
func BenchmarkScale(b *testing.B) {
	type shape struct{ hosts, procs int }
	shapes := []shape{{1, 4}, {4, 4}, {16, 4}, {32, 4}, {64, 4}, {128, 2}}
	if s := os.Getenv("MONARCH_SCALE_SIZES"); s != "" {
		shapes = shapes[:0]
		for _, f := range strings.Split(s, ",") {
			h, p, ok := strings.Cut(strings.TrimSpace(f), "x")
			if !ok {
				p = "4"
			}
			hosts, err1 := strconv.Atoi(h)
			procs, err2 := strconv.Atoi(p)
			if err1 != nil || err2 != nil || hosts < 1 || procs < 1 {
				b.Fatalf("MONARCH_SCALE_SIZES=%q: want HOSTS or HOSTSxPROCS, comma-separated", s)
			}
			shapes = append(shapes, shape{hosts, procs})
		}
	}
	bin := build(b)
	fmt.Printf("%-6s %-6s %-8s %-8s %-9s %-10s %-10s %-10s %-10s %-14s %-8s %-8s %-8s\n",
		"hosts", "procs", "bus", "spawn-s", "spawn-cpu", "call-p50", "call-p99", "slice-p50", "single-p50", "bcast/s", "exit-s", "hub-cpu", "hub-subs")
	run := func(sh shape, direct bool) map[string]string {
		r := scaleRun(b, bin, sh.hosts, direct, "-procs", strconv.Itoa(sh.procs), "-actors", "4", "-calls", "100", "-flood", "20000", "-kill=false")
		m, topo := r.metrics, "leaves"
		if direct {
			topo = "direct"
		}
		fmt.Printf("%-6d %-6s %-8s %-8.2f %-9.2f %-10s %-10s %-10s %-10s %-14s %-8.2f %-8.2f %-8s\n", sh.hosts, m["procs"], topo, atof(m["spawn-s"]),
			atof(m["spawn-procs-cpu-s"]), m["call-p50-us"]+"us", m["call-p99-us"]+"us", m["slice-p50-us"]+"us", m["single-p50-us"]+"us",
			m["flood-deliveries-per-s"], r.exit.Seconds(), r.hubCPU, m["hub-subs"])
		return m
	}
	results := map[shape]map[string]string{}
	var largest shape // the most hosts with 4 procs each
	for _, sh := range shapes {
		results[sh] = run(sh, false)
		if sh.procs == 4 && sh.hosts > largest.hosts {
			largest = sh
		}
	}
	big := results[largest]
	if big == nil {
		return
	}
	n := largest.hosts
	perProc := func(m map[string]string) float64 { return atof(m["spawn-procs-s"]) / atof(m["procs"]) * 1000 }
	if small := results[shape{4, 4}]; small != nil && n > 4 {
		fmt.Printf("BENCH scale-spawn-ms-per-proc-%dx4-vs-4x4 ours=%.2f floor=%.2f ratio=%.3f target<=1.5\n", n, perProc(big), perProc(small), perProc(big)/perProc(small))
	}
	slice, single := atof(big["slice-p50-us"]), atof(big["single-p50-us"])
	fmt.Printf("BENCH scale-slice-vs-single-p50-%dhosts ours=%.0f floor=%.0f ratio=%.3f target<=1.5\n", n, slice, single, slice/single)
	direct := run(largest, true)
	leaf, dir := atof(big["flood-s"]), atof(direct["flood-s"])
	fmt.Printf("BENCH scale-flood-s-direct-vs-leaves-%dhosts ours=%.2f floor=%.2f ratio=%.3f (direct/leaves; >1: the leaves are faster)\n", n, dir, leaf, dir/leaf)
}

// scaleResult is one run of the scale program, measured from outside.
type scaleResult struct {
	metrics map[string]string
	exit    time.Duration // from the program's last line to the launcher's exit
	hubCPU  float64       // CPU seconds of the monarch process (not its children) per second of run
}

func scaleRun(b *testing.B, bin string, hosts int, direct bool, args ...string) scaleResult {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	argv := scaleArgv(b, bin, hosts, direct, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "monarch"), argv...)
	cmd.Env = append(os.Environ(), "MONARCH_METRICS=1") // the hub's subscriptions
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// The process's own CPU time, read until it exits (the wait status
	// would add its children's).
	var cpu atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if st, err := procstat.Read(cmd.Process.Pid); err == nil {
				cpu.Store(st.CPUTicks)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	end := time.Now()
	cancel()
	<-sampled
	if err != nil || !strings.Contains(out.String(), "\nOK\n") {
		b.Fatalf("%d hosts: %v:\n%s", hosts, err, out.String())
	}
	r := scaleResult{metrics: metrics(out.String())}
	if ms, err := strconv.ParseInt(r.metrics["done-unix-ms"], 10, 64); err == nil {
		r.exit = end.Sub(time.UnixMilli(ms))
	}
	r.hubCPU = float64(cpu.Load()) / 100 / end.Sub(start).Seconds() // USER_HZ is 100 on Linux
	return r
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}
