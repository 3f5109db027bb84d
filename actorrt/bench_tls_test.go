package actorrt_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobca"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// The cost of TLS on the bus: W1 and W2 with the client and its procs
// dialing the bus over loopback TCP, TLS 1.3 with a job CA's certificate
// against plaintext, nothing else different. A client run directly
// attaches to its own bus in process, so each run is a child: this test
// binary again, as a client under a launcher (the MONARCH_BUS_* of
// jobenv, a job id of the run's prefix; the state and log dirs are the
// run's temporary ones, which testenv gave this process), on a bus
// server started here as a launcher starts one. Plain and TLS children
// alternate, which goes first changing each pair, and the lines give the
// medians of their rounds: ours is TLS, floor is plaintext.
//
// Where the cost goes (2 vCPUs with AES-NI; client, procs and server
// profiled together): W1 pays, on each of its 4 hops, a seal and an open
// of a ~100-byte record, ~9 µs of CPU a call in all (a W1-only profile:
// record framing, copies and locks ~7 µs, AES-GCM ~2 µs), all on the
// round trip's path: the ~10% on ~90 µs. A hot loop pays half as much
// (a 200-byte loopback ping-pong: 7.1 µs plain, 8.9 µs TLS); W1's
// processes sleep between messages and wake with cold caches. No extra
// syscalls: the same reads and writes either way (/proc/PID/io: ~14 per
// W1 call, ~13 per 1000 W2 messages), each write one record, 22 bytes
// longer. W2's batches put ~3 bytes a message on the wire, which AES-GCM
// seals at GB/s: its cost is within the noise (crypto/tls is 3% of the
// CPU of a whole run). The handshake, once per connection (the client's
// and each proc's), costs ~1.3 ms: the connect p50 printed beside the
// lines.

const (
	// tlsChildVar, set, makes BenchmarkW1W2TLS a child: measure, print.
	tlsChildVar = "MONARCH_BENCH_TLS_CHILD"
	// tlsProfileVar names a dir for CPU profiles of every child run: its
	// client, its procs and the bus server here.
	tlsProfileVar = "MONARCH_BENCH_TLS_PROFILE"

	tlsPairs       = 5                // plain and TLS children
	tlsChildRounds = 3                // of W1 and W2 in each child
	tlsW2Msgs      = 500000           // a W2 round: ~0.2 s at the plaintext rate
	tlsChildFor    = 90 * time.Second // a child takes ~2 s
)

// tlsVariant is how a child's bus server runs and how its processes dial it.
type tlsVariant struct {
	name   string
	server *bus.ServerTLS
	client bus.ClientTLS
}

// BenchmarkW1W2TLS: W1 (CallOne p50) and W2 (one-way Broadcast rate) with
// the bus over loopback TCP, TLS on against off. Informational targets:
// W1 ratio <= 1.2, the ~10% that four records sealed and opened cost, with
// room for this shared machine's noise; W2 >= 0.8, as TLS costs it next
// to nothing.
func BenchmarkW1W2TLS(b *testing.B) {
	if os.Getenv(tlsChildVar) != "" {
		tlsChild(b)
		return
	}
	ca, err := jobca.New("bench-tls", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := ca.IssueTLS("hub", []string{jobca.HubName})
	if err != nil {
		b.Fatal(err)
	}
	variants := [2]tlsVariant{{name: "plain"}, {name: "tls",
		server: &bus.ServerTLS{Cert: cert, PeerCA: ca.CertPEM()},
		client: bus.ClientTLS{CA: ca.CertPEM(), Name: jobca.HubName}}}
	var w1, w2, conn [2][]float64
	for pair := 0; pair < tlsPairs; pair++ {
		for k := 0; k < 2; k++ {
			v := (pair + k) % 2
			a, b2, c := runTLSChild(b, variants[v], pair)
			w1[v], w2[v], conn[v] = append(w1[v], a...), append(w2[v], b2...), append(conn[v], c...)
		}
	}
	fmt.Printf("bus connect (handshake included) p50: tls %.2f ms, plain %.2f ms\n", median(conn[1]), median(conn[0]))
	report(b, "W1-callone-tls-p50-us", w1[1], w1[0], "us", "<=", 1.2)
	report(b, "W2-broadcast-tls-msgs-per-s", w2[1], w2[0], "msgs/s", ">=", 0.8)
}

// runTLSChild starts a bus server as v says, times a few connections to
// it, then runs a child client on it and returns the child's W1 p50s (µs)
// and W2 rates, and the connect times (ms).
func runTLSChild(b *testing.B, v tlsVariant, pair int) (w1, w2, connect []float64) {
	srv, err := bus.StartServer(bus.ServerOptions{Host: "127.0.0.1", TLS: v.server})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	for i := 0; i < 10; i++ {
		t0 := time.Now()
		c, err := bus.Connect(srv.URL(), bus.ConnOptions{Name: "probe", Token: srv.Token(), TLS: v.client})
		if err != nil {
			b.Fatal(err)
		}
		connect = append(connect, float64(time.Since(t0).Microseconds())/1e3)
		c.Close()
	}
	job, err := jobstate.NewID()
	if err != nil {
		b.Fatal(err)
	}
	env := jobenv.Env{Job: job, Bus: jobenv.Bus{URL: srv.URL(), Token: srv.Token(), TLSCA: string(v.client.CA), TLSName: v.client.Name}}
	vars := append(env.Environ(), tlsChildVar+"=1")
	tag := ""
	if dir := os.Getenv(tlsProfileVar); dir != "" {
		tag = filepath.Join(dir, fmt.Sprintf("%s-%d", v.name, pair))
		if stop := startServerProfile(tag + "-server.prof"); stop != nil {
			defer stop()
		}
	}
	out, _ := runBenchChild(b, "BenchmarkW1W2TLS", vars, tag)
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "TLSCHILD" {
			return parseFloats(b, f[1]), parseFloats(b, f[2]), connect
		}
	}
	b.Fatalf("%s child printed no figures:\n%s", v.name, out)
	return nil, nil, nil
}

// runBenchChild runs this test binary again as a child that runs only
// benchmark bench, with vars added to a clean environment (a profile of
// its client and procs under tag when tag is not ""), and returns its
// output and the CPU its process and the procs it waited for used. A
// child that fails fails b, with what it wrote.
func runBenchChild(b *testing.B, bench string, vars []string, tag string) (out []byte, usage *syscall.Rusage) {
	args := []string{"-test.run=^$", "-test.bench=^" + bench + "$", "-test.benchtime=1x", "-test.count=1", "-test.timeout=" + (tlsChildFor + 30*time.Second).String()}
	if tag != "" {
		if err := os.MkdirAll(tag+"-procs", 0o755); err != nil {
			b.Fatal(err)
		}
		args = append(args, "-test.cpuprofile="+tag+"-client.prof")
		vars = append(vars, "MONARCH_TEST_PROC_CPUPROFILE="+tag+"-procs")
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(clientCtx, tlsChildFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(jobenv.Clean(os.Environ()), vars...)
	// SIGINT: the client stops its procs before it exits; then a kill.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	var stderr bytes.Buffer // the dashboard's address, and what went wrong
	cmd.Stderr = &stderr
	if out, err = cmd.Output(); err != nil {
		b.Fatalf("%s child: %v\n%s%s", bench, err, out, &stderr)
	}
	return out, cmd.ProcessState.SysUsage().(*syscall.Rusage)
}

// startServerProfile profiles this process, the bus server's side, into
// path; nil when it cannot (go test -cpuprofile already does).
func startServerProfile(path string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		return nil
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// tlsChild measures W1 and W2 on the bus its environment names, and
// prints `TLSCHILD <W1 p50s> <W2 rates>`, each comma-separated.
func tlsChild(b *testing.B) {
	w1, w2 := childW1W2(b, tlsChildRounds, tlsW2Msgs)
	fmt.Printf("TLSCHILD %s %s\n", strings.Join(w1, ","), strings.Join(w2, ","))
}

// childW1W2 measures W1 (the p50 of 2000 calls, µs) and W2 (w2Msgs
// one-way messages, msgs/s) rounds times each, after a warm-up, in a
// child client: each figure formatted.
func childW1W2(b *testing.B, rounds, w2Msgs int) (w1, w2 []string) {
	ctx := clientCtx
	echo := spawnRemote[Echo](b, "w1")
	rec := spawnRemote[Recorder](b, "w2")
	ping := actorrt.Method((*Echo).Ping)
	call := func() error { _, err := ping.CallOne(echo).Get(ctx); return err }
	hit := actorrt.VoidMethod((*Recorder).Hit)
	send := func(r *actorrt.ActorMesh[Recorder]) error { return hit.Broadcast(r) }
	sent := 0
	latencies(b, 500, call) // warm up both paths
	recorderRate(b, rec, w2Msgs/5, &sent, send)
	for r := 0; r < rounds; r++ {
		w1 = append(w1, strconv.FormatFloat(median(latencies(b, 2000, call)), 'f', 2, 64))
		w2 = append(w2, strconv.FormatFloat(recorderRate(b, rec, w2Msgs, &sent, send), 'f', 0, 64))
	}
	return w1, w2
}

func parseFloats(b *testing.B, s string) []float64 {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			b.Fatalf("child figure %q: %v", f, err)
		}
		out = append(out, x)
	}
	return out
}
