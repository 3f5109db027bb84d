package actorrt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// BenchmarkRestartAfterPanic: a member of a mesh with a restart policy
// (no backoff) panics with nobody to receive it; the time until its new
// instance answers a call (sent right after the panic, held for it or
// retried if it was in the failed one's mailbox), beside what the owner
// did before restarts in place: a fresh 1-proc mesh and its actor,
// spawned until it answers. Medians in ms.
func BenchmarkRestartAfterPanic(b *testing.B) {
	m, dir := restartingPhoenix(b, "bench-restart")
	ours := func() float64 { return untilNewInstance(b, m, (*Phoenix).Panic) }
	o, f := alternate(b, 15, ours, func() float64 { return freshMesh(b, dir) })
	report(b, "restart-after-panic-ms", o, f, "ms", "<=", 0.1)
}

// restartingPhoenix spawns a Phoenix on a proc of its own, with a restart
// policy that allows as many restarts as a benchmark makes, and no
// backoff; dir is its directory.
func restartingPhoenix(b *testing.B, name string) (m *actorrt.ActorMesh[Phoenix], dir string) {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { procs.Stop(ctx) })
	policy := actorrt.RestartPolicy{MaxRestarts: 1 << 20, Window: time.Second}
	dir = b.TempDir()
	m, err = actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, name, actorrt.SpawnOptions{Restart: &policy}, dir)
	if err != nil {
		b.Fatal(err)
	}
	return m, dir
}

// untilNewInstance makes m's one member fail with fail (sent with
// Broadcast) and returns the time until a new instance answers, in ms.
func untilNewInstance(b *testing.B, m *actorrt.ActorMesh[Phoenix], fail func(*Phoenix, *actorrt.Context) error) float64 {
	ctx := clientCtx
	old, err := phoenixNonce.CallOne(m).Get(ctx)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := actorrt.VoidMethod(fail).Broadcast(m); err != nil {
		b.Fatal(err)
	}
	for deadline := t0.Add(30 * time.Second); ; {
		n, err := phoenixNonce.CallOne(m).Get(ctx)
		if err == nil && n != old {
			return float64(time.Since(t0).Microseconds()) / 1e3
		}
		if time.Now().After(deadline) {
			b.Fatalf("no new instance within 30s: %v", err)
		}
	}
}

// freshMesh spawns a 1-proc mesh and a Phoenix on it, until it answers;
// it returns the time that took, in ms, and stops the proc.
func freshMesh(b *testing.B, dir string) float64 {
	ctx := clientCtx
	t0 := time.Now()
	p, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		b.Fatal(err)
	}
	fresh, err := actorrt.Init1((*Phoenix).Init).Spawn(ctx, p, "bench-fresh", dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := phoenixNonce.CallOne(fresh).Get(ctx); err != nil {
		b.Fatal(err)
	}
	took := float64(time.Since(t0).Microseconds()) / 1e3
	if err := p.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	return took
}

// BenchmarkRestartAfterProcKill: the proc of a member of a mesh with a
// restart policy is killed (SIGKILL); the time until the member answers
// again, from the new proc its host agent started in the old one's place,
// beside a fresh 1-proc mesh and its actor spawned until it answers.
// Medians in ms.
func BenchmarkRestartAfterProcKill(b *testing.B) {
	m, dir := restartingPhoenix(b, "bench-proc-kill")
	ours := func() float64 { return untilNewInstance(b, m, (*Phoenix).Die) }
	o, f := alternate(b, 9, ours, func() float64 { return freshMesh(b, dir) })
	report(b, "restart-after-proc-kill-ms", o, f, "ms", "<=", 1.5)
}

// BenchmarkTwoMeshesAfterProcKill: a proc hosts members of two meshes
// with restart policies; it is killed (SIGKILL); the time until both
// meshes' members answer again, from the one proc its host agent started
// in its place, over 20 kills (p50 and p99), beside a fresh 1-proc mesh
// and its actor spawned until it answers (the cold start a replacement
// cannot beat without a spare). In ms.
func BenchmarkTwoMeshesAfterProcKill(b *testing.B) {
	meshes, dir := twoRestartingMeshes(b, "bench-two")
	ours := func() float64 { return untilBothAnswer(b, meshes) }
	o, f := alternate(b, 20, ours, func() float64 { return freshMesh(b, dir) })
	reportP50P99(b, "two-meshes-after-proc-kill", o, f, 1.5)
}

// BenchmarkTwoMeshesFromSpare: as BenchmarkTwoMeshesAfterProcKill, the
// proc mesh kept with a spare (WithSpares(1)), which takes the killed
// proc's slot; beside an actor restarted in place after a panic (the
// floor a restart from a spare aims at: within 2x of it). Before each
// kill the pool is let refill (a spare up): what is timed is a kill
// that finds a spare. Over 20 kills, p50 and p99, in ms.
func BenchmarkTwoMeshesFromSpare(b *testing.B) {
	meshes, _ := twoRestartingMeshes(b, "bench-spare", actorrt.WithSpares(1))
	panicky, _ := restartingPhoenix(b, "bench-spare-panic")
	ours := func() float64 {
		for deadline := time.Now().Add(30 * time.Second); actorrt.IdleSpares(clientCtx) < 1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("no spare up within 30s")
			}
		}
		return untilBothAnswer(b, meshes)
	}
	floor := func() float64 { return untilNewInstance(b, panicky, (*Phoenix).Panic) }
	o, f := alternate(b, 20, ours, floor)
	reportP50P99(b, "two-meshes-from-spare", o, f, 2)
}

// twoRestartingMeshes spawns a 1-proc mesh with opts and two Phoenix
// meshes with restart policies (no backoff) on it.
func twoRestartingMeshes(b *testing.B, name string, opts ...actorrt.ProcOption) ([]*actorrt.ActorMesh[Phoenix], string) {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { procs.Stop(ctx) })
	dir := b.TempDir()
	meshes := restartingPhoenixes(b, procs, actorrt.RestartPolicy{MaxRestarts: 1 << 20, Window: time.Second}, dir, name+"-a", name+"-b")
	return meshes, dir
}

// untilBothAnswer kills the proc of the meshes' one member (SIGKILL) and
// returns the time until both meshes' new instances answer, in ms.
func untilBothAnswer(b *testing.B, meshes []*actorrt.ActorMesh[Phoenix]) float64 {
	ctx := clientCtx
	var old []int64
	for _, m := range meshes {
		n, err := phoenixNonce.CallOne(m).Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		old = append(old, n)
	}
	t0 := time.Now()
	if err := actorrt.VoidMethod((*Phoenix).Die).Broadcast(meshes[0]); err != nil {
		b.Fatal(err)
	}
	for i, m := range meshes {
		for deadline := t0.Add(30 * time.Second); ; {
			n, err := phoenixNonce.CallOne(m).Get(ctx)
			if err == nil && n != old[i] {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: no new instance within 30s: %v", m.Name(), err)
			}
		}
	}
	return float64(time.Since(t0).Microseconds()) / 1e3
}

// reportP50P99 prints the BENCH lines of name's p50 and p99, in ms.
func reportP50P99(b *testing.B, name string, o, f []float64, target float64) {
	report(b, name+"-p50-ms", o, f, "ms", "<=", target)
	fmt.Printf("BENCH %s-p99-ms ours=%.2f floor=%.2f ratio=%.3f target<=%g\n",
		name, quantile(o, 0.99), quantile(f, 0.99), quantile(o, 0.99)/quantile(f, 0.99), target)
}

// restartingPhoenixes spawns a Phoenix mesh of each name on procs, with
// policy; dir is their directory.
func restartingPhoenixes(b *testing.B, procs *actorrt.ProcMesh, policy actorrt.RestartPolicy, dir string, names ...string) []*actorrt.ActorMesh[Phoenix] {
	var meshes []*actorrt.ActorMesh[Phoenix]
	for _, name := range names {
		m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(clientCtx, procs, name, actorrt.SpawnOptions{Restart: &policy}, dir)
		if err != nil {
			b.Fatal(err)
		}
		meshes = append(meshes, m)
	}
	return meshes
}

// quantile is the q-quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// BenchmarkProcKillSoak: a 4 x 4 job (4 simulated hosts, 4 procs each,
// real processes) with two meshes with restart policies and a steady
// stream of calls to both, while a proc picked at random is killed
// (SIGKILL) every 3 s: 200 kills over 10 minutes. Every call must be
// answered or fail with ErrProcFailed or ErrActorFailed (the restart's
// errors, counted); any other error, or a call not settled within a
// minute, fails the run. After each kill, the time until both meshes'
// members of that slot answer from a new instance (p50 and p99, beside a
// fresh 1-proc mesh spawned until it answers, 5 times at the end, under
// the same stream of calls). The client's heap and RSS,
// the job's process count and their RSS are sampled, and nothing of the
// job may be left after its procs are stopped.
//
// Not in make bench: make bench-soak runs it. MONARCH_SOAK=1m makes a
// shorter run, with as many kills in proportion; MONARCH_SOAK_HEAP=dir
// writes the client's heap profile there at each sample.
func BenchmarkProcKillSoak(b *testing.B) {
	length := 10 * time.Minute
	if s := os.Getenv("MONARCH_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 10*time.Second {
			b.Fatalf("MONARCH_SOAK=%q: want a duration of 10s or more", s)
		}
		length = d
	}
	kills := int(200 * length / (10 * time.Minute))
	every := length / time.Duration(kills)
	ctx := clientCtx
	hosts := simulatedHosts(b, ctx, 4)
	baseline := jobProcs()
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}})
	if err != nil {
		b.Fatal(err)
	}
	stopped := false
	b.Cleanup(func() {
		if !stopped {
			procs.Stop(ctx)
		}
	})
	dir := b.TempDir()
	meshes := restartingPhoenixes(b, procs, actorrt.RestartPolicy{MaxRestarts: 1 << 20, Window: time.Minute}, dir, "soak-a", "soak-b")

	// The stream of calls: one caller a mesh, each call bounded.
	var answered, failedRestart atomic.Int64
	var other []string
	var restartErr atomic.Pointer[string] // one, to show what a caller saw
	var otherMu sync.Mutex
	done := make(chan struct{})
	var callers sync.WaitGroup
	for _, m := range meshes {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				_, err := phoenixNonce.Call(m).Get(cctx)
				cancel()
				switch {
				case err == nil:
					answered.Add(1)
				case errors.Is(err, actorrt.ErrProcFailed) || errors.Is(err, actorrt.ErrActorFailed):
					failedRestart.Add(1)
					msg := err.Error()
					restartErr.CompareAndSwap(nil, &msg)
				default:
					otherMu.Lock()
					other = append(other, err.Error())
					otherMu.Unlock()
				}
			}
		}()
	}

	// The samples: the client's heap and RSS, the job's processes.
	type sample struct {
		heap, rss, jobRSS uint64
		n                 int
	}
	var samples []sample
	heapDir := os.Getenv("MONARCH_SOAK_HEAP") // heap profiles of the client at each sample there
	take := func() {
		runtime.GC()
		if heapDir != "" {
			if f, err := os.Create(filepath.Join(heapDir, fmt.Sprintf("heap-%03d.pprof", len(samples)))); err == nil {
				pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		job := jobProcs()
		s := sample{heap: ms.HeapAlloc, rss: rssOf(os.Getpid()), n: len(job) - len(baseline)}
		for pid := range job {
			if !baseline[pid] {
				s.jobRSS += rssOf(pid)
			}
		}
		samples = append(samples, s)
	}
	take()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 38))
	var back []float64 // kill to both answering again, ms
	skipped := 0
	start := time.Now()
	for k := 0; k < kills; k++ {
		next := start.Add(time.Duration(k+1) * every)
		pt := procs.Extent().Points()[rng.IntN(procs.Extent().NumRanks())]
		slot := procs.SliceAt(pt)
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		pid, err := pidFn.Call(slot).Get(pctx)
		cancel()
		if err != nil {
			b.Fatalf("kill %d: the pid of slot %v: %v", k, pt, err)
		}
		var old []int64
		for _, m := range meshes {
			n, err := phoenixNonce.CallOne(m.SliceAt(pt)).Get(ctx)
			if err != nil {
				b.Fatalf("kill %d: %s%v before the kill: %v", k, m.Name(), pt, err)
			}
			old = append(old, n)
		}
		t0 := time.Now()
		if err := syscall.Kill(pid.Values()[0], syscall.SIGKILL); err != nil {
			skipped++
			continue
		}
		for i, m := range meshes {
			for deadline := t0.Add(time.Minute); ; {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				n, err := phoenixNonce.CallOne(m.SliceAt(pt)).Get(cctx)
				cancel()
				if err == nil && n != old[i] {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("kill %d: %s%v has not answered from a new instance within a minute: %v", k, m.Name(), pt, err)
				}
			}
		}
		back = append(back, float64(time.Since(t0).Microseconds())/1e3)
		take()
		time.Sleep(time.Until(next))
	}
	// The floor under the same load: the callers still call.
	var fresh []float64
	for range 5 {
		fresh = append(fresh, freshMesh(b, dir))
	}
	close(done)
	callers.Wait()
	take()

	stopped = true
	if err := procs.Stop(ctx); err != nil {
		b.Fatalf("stop the job's procs: %v", err)
	}
	left := jobProcs()
	for deadline := time.Now().Add(30 * time.Second); len(left) > len(baseline) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left = jobProcs()
	}
	if len(left) > len(baseline) {
		b.Errorf("%d processes of the job left after its procs were stopped", len(left)-len(baseline))
	}
	if len(other) > 0 {
		b.Errorf("%d calls failed with errors other than a restart's, the first: %s", len(other), other[0])
	}

	first, last := samples[0], samples[len(samples)-1]
	peak := first
	for _, s := range samples {
		peak.heap, peak.rss, peak.jobRSS, peak.n = max(peak.heap, s.heap), max(peak.rss, s.rss), max(peak.jobRSS, s.jobRSS), max(peak.n, s.n)
	}
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	fmt.Printf("soak: %v, %d kills (%d skipped), %d calls answered, %d failed with a restart's error, %d with another\n",
		time.Since(start).Round(time.Second), len(back), skipped, answered.Load(), failedRestart.Load(), len(other))
	if e := restartErr.Load(); e != nil {
		fmt.Printf("soak: a call that failed with a restart's error: %s\n", *e)
	}
	fmt.Printf("soak: client heap MB first/last/max %.1f/%.1f/%.1f, client RSS MB %.1f/%.1f/%.1f, job processes %d/%d/%d, their RSS MB %.1f/%.1f/%.1f\n",
		mb(first.heap), mb(last.heap), mb(peak.heap), mb(first.rss), mb(last.rss), mb(peak.rss), first.n, last.n, peak.n, mb(first.jobRSS), mb(last.jobRSS), mb(peak.jobRSS))
	fmt.Printf("BENCH soak-kills ours=%d floor=%d ratio=%.3f target>=1\n", len(back), kills, float64(len(back))/float64(kills))
	settled := answered.Load() + failedRestart.Load()
	fmt.Printf("BENCH soak-calls-answered ours=%d floor=%d ratio=%.3f target>=0.9\n", answered.Load(), settled+int64(len(other)), float64(answered.Load())/float64(settled+int64(len(other))))
	fmt.Printf("BENCH soak-calls-failed-naming-restart ours=%d floor=%d ratio=%.3f target<=0.1\n", failedRestart.Load(), settled+int64(len(other)), float64(failedRestart.Load())/float64(settled+int64(len(other))))
	fmt.Printf("BENCH soak-kill-to-answering-p50-ms ours=%.2f floor=%.2f ratio=%.3f target<=1.5\n", quantile(back, 0.5), quantile(fresh, 0.5), quantile(back, 0.5)/quantile(fresh, 0.5))
	fmt.Printf("BENCH soak-kill-to-answering-p99-ms ours=%.2f floor=%.2f ratio=%.3f target<=1.5\n", quantile(back, 0.99), quantile(fresh, 0.99), quantile(back, 0.99)/quantile(fresh, 0.99))
	fmt.Printf("BENCH soak-client-rss-max-MB ours=%.1f floor=%.1f ratio=%.3f target<=1.5\n", mb(peak.rss), mb(first.rss), float64(peak.rss)/float64(first.rss))
	fmt.Printf("BENCH soak-job-rss-max-MB ours=%.1f floor=%.1f ratio=%.3f target<=1.5\n", mb(peak.jobRSS), mb(first.jobRSS), float64(peak.jobRSS)/float64(first.jobRSS))
	fmt.Printf("BENCH soak-job-processes-max ours=%d floor=%d ratio=%.3f target<=1.25\n", peak.n, first.n, float64(peak.n)/float64(first.n))
}

// jobProcs is the set of this process's descendants, by pid.
func jobProcs() map[int]bool {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after its ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	self := os.Getpid()
	out := map[int]bool{}
	for pid := range parent {
		for p, hops := parent[pid], 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if p == self {
				out[pid] = true
				break
			}
		}
	}
	return out
}

// rssOf is the resident set of process pid, in bytes (0 once it ended).
func rssOf(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
