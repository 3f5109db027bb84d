package ibverbs_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/testcluster"
)

// floodConns is how many connections the flood holds at once.
const floodConns = 10000

// flood is the IBVERBS_FLOOD helper: what anyone who reaches a buffer
// server can do without a key. It holds IBVERBS_FLOOD_CONNS connections
// (default floodConns; the benchmark passes on its own) to addr open,
// saying nothing, and opens another whenever the server closes one; it
// prints FLOODING once it has dialled them all, and runs until its stdin
// closes.
func flood(addr string) int {
	n := floodConns
	fmt.Sscan(os.Getenv("IBVERBS_FLOOD_CONNS"), &n)
	var dialled atomic.Int64
	var once sync.Once
	for range n {
		go func() {
			for {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if dialled.Add(1) == int64(n) {
					once.Do(func() { fmt.Println("FLOODING") })
				}
				if err != nil {
					time.Sleep(10 * time.Millisecond) // out of ports or descriptors: again
					continue
				}
				io.Copy(io.Discard, c) // until the server closes it
				c.Close()
			}
		}()
	}
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// BenchmarkTCPUnderFlood: a 4 MiB read from another process's buffer
// over tcp, each on a new connection (a reader's first transfer from an
// owner), while another process holds 10,000 connections to the owner's
// server that never send a byte and reopens each the server closes,
// beside the same reads without the flood (before it and after it).
// Milliseconds, medians (the log has the 90th percentiles). Where the
// test cluster runs, the flood is its other user's: from this machine
// (the reader's own address) and from host h1; elsewhere, a helper
// process of the test binary on loopback.
func BenchmarkTCPUnderFlood(b *testing.B) {
	const size = 4 << 20
	b.Setenv(ibverbs.EnvBackend, "tcp")
	c, where := floodCluster(b)
	addr := "127.0.0.1"
	if c != nil {
		addr = c.Advertise // reachable from the hosts
	}
	o := startOwnerEnv(b, size, "MONARCH_HOST_ADDR="+addr)
	dst := make([]byte, size)
	read := func() float64 {
		ibverbs.DropIdleConns()
		t0 := time.Now()
		if err := o.h.ReadInto(context.Background(), dst); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(t0).Microseconds()) / 1000
	}
	// Reads 250 ms apart: 10 s of them without the flood, before and
	// after; 65 s with it, in which the door lets go of every silent
	// connection it holds (between holdBound and twice that) and the
	// flood opens another.
	reads := func(d time.Duration) (ms []float64) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			ms = append(ms, read())
		}
		return ms
	}
	for _, from := range where {
		floor := reads(10 * time.Second)
		stop := startFlood(b, c, from, o.h.Addr)
		ours := reads(65 * time.Second)
		stop()
		floor = append(floor, reads(10*time.Second)...)
		b.Logf("from %q: under the flood, %d reads: median %.2f ms, 90th percentile %.2f ms, most %.2f ms; without, %.2f, %.2f, %.2f",
			from, len(ours), median(ours), percentile(ours, 0.9), slices.Max(ours), median(floor), percentile(floor, 0.9), slices.Max(floor))
		om, fm := median(ours), median(floor)
		name := map[string]string{"": "samehost", "h1": "otherhost"}[from]
		fmt.Printf("BENCH rdma-tcp-4MiB-flood10k-%s-ms ours=%.2f floor=%.2f ratio=%.3f target<=2\n", name, om, fm, om/fm)
	}
}

// TestFloodFromOtherUser: while the test cluster's other user holds
// 10,000 connections to a buffer server that never send a byte (reopening
// each the server closes), from this machine (the reader's own address)
// and from host h1, every read from that server, each on a new
// connection, goes through whole.
func TestFloodFromOtherUser(t *testing.T) {
	c := testcluster.Get(t)
	t.Setenv(ibverbs.EnvBackend, "tcp")
	o := startOwnerEnv(t, 1<<20, "MONARCH_HOST_ADDR="+c.Advertise)
	want := make([]byte, o.h.Size)
	pattern(want, 1)
	got := make([]byte, o.h.Size)
	for _, from := range []string{"", "h1"} {
		stop := startFlood(t, c, from, o.h.Addr)
		for i := range 30 {
			ibverbs.DropIdleConns()
			clear(got)
			if err := o.h.ReadInto(context.Background(), got); err != nil || !slices.Equal(got, want) {
				stop()
				t.Fatalf("read %d under the flood from %q: %v (or other bytes)", i, from, err)
			}
		}
		stop()
	}
}

// floodCluster is the test cluster, and the hosts the flood comes from
// there ("" is this machine); without it, nil and this machine.
func floodCluster(b *testing.B) (*testcluster.Cluster, []string) {
	if os.Getenv("MONARCH_REQUIRE_CLUSTER") != "1" && os.Geteuid() != 0 {
		return nil, []string{""}
	}
	return testcluster.Get(b), []string{"", "h1"}
}

// startFlood starts the flood of addr from host (as the cluster's other
// user when c is set) and returns once it dialled every connection; stop
// ends it.
func startFlood(b testing.TB, c *testcluster.Cluster, host, addr string) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	exe, _ := os.Executable()
	var cmd *exec.Cmd
	if c == nil {
		cmd = exec.CommandContext(ctx, exe)
		cmd.Env = os.Environ()
	} else {
		cmd = c.AsOther(ctx, host, otherCanRun(b, exe))
	}
	cmd.Env = append(cmd.Env, "IBVERBS_FLOOD="+addr, "IBVERBS_FLOOD_CONNS="+os.Getenv("IBVERBS_FLOOD_CONNS"))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop = func() {
		in.Close()
		cancel()
		cmd.Wait()
	}
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		ready <- s.Scan() && strings.TrimSpace(s.Text()) == "FLOODING"
		io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if !ok {
			stop()
			b.Fatal("the flood did not start")
		}
	case <-time.After(2 * time.Minute):
		stop()
		b.Fatal("the flood did not dial its connections within 2 minutes")
	}
	return stop
}

// otherCanRun is a copy of the program at exe that another user can run,
// removed when the benchmark ends.
func otherCanRun(b testing.TB, exe string) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "ibverbs-flood-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "flood")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		b.Fatal(err)
	}
	return path
}
