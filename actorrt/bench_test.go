package actorrt_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/bus"
	"github.com/nats-io/nats.go"
)

// The benchmarks compare the runtime with raw NATS in the same topology,
// measured in the same run: the caller attached in-process to an embedded
// server, the callee in another process over loopback TCP. Each prints one
// line: BENCH <name> ours=<v> floor=<v> ratio=<ours/floor> target<=X (or
// target>=X for throughput), and rounds of ours and floor alternate so
// that a noisy neighbour hurts both alike.

const benchRounds = 7

// rawBus is a separate embedded server with a raw nats.go connection in
// process, for the floors.
type rawBus struct {
	srv *bus.Server
	nc  *nats.Conn
}

func newRawBus(b *testing.B) *rawBus {
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Token(srv.Token()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close(); srv.Shutdown() })
	return &rawBus{srv: srv, nc: nc}
}

// startRaw runs a raw NATS helper process and waits for it to serve.
func (r *rawBus) startRaw(b *testing.B, mode string, arg int) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "MONARCH_TEST_HELPER="+mode, "RAW_URL="+r.srv.URL(), "RAW_TOKEN="+r.srv.Token(), "RAW_ARG="+strconv.Itoa(arg))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := r.nc.Request("bench.ready."+mode, nil, time.Second); err == nil {
			return
		}
	}
	b.Fatalf("raw helper %s not ready", mode)
}

// runRawHelper serves the raw side of a benchmark: "raw-rr" answers
// requests, "raw-fan" answers with arg subscriptions, "raw-sink" counts.
func runRawHelper(mode string) int {
	nc, err := nats.Connect(os.Getenv("RAW_URL"), nats.Token(os.Getenv("RAW_TOKEN")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	arg, _ := strconv.Atoi(os.Getenv("RAW_ARG"))
	reply := []byte{0x01}
	switch mode {
	case "raw-rr":
		nc.Subscribe("bench.rr", func(m *nats.Msg) { m.Respond(reply) })
	case "raw-fan":
		for i := 0; i < arg; i++ {
			nc.Subscribe("bench.fan", func(m *nats.Msg) { m.Respond(reply) })
		}
	case "raw-sink":
		count := 0
		sub, _ := nc.Subscribe("bench.sink", func(m *nats.Msg) {
			if m.Reply != "" {
				m.Respond([]byte(strconv.Itoa(count)))
				return
			}
			count++
		})
		sub.SetPendingLimits(-1, -1)
	}
	nc.Subscribe("bench.ready."+mode, func(m *nats.Msg) { m.Respond(nil) })
	nc.Flush()
	select {}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func report(b *testing.B, name string, ours, floor []float64, unit, dir string, target float64) {
	o, f := median(ours), median(floor)
	b.ReportMetric(o, unit+"-ours")
	b.ReportMetric(f, unit+"-floor")
	fmt.Printf("BENCH %s ours=%.2f floor=%.2f ratio=%.3f target%s%g\n", name, o, f, o/f, dir, target)
}

// spawnRemote spawns an actor of type A in a proc of its own, stopped
// when the benchmark ends.
func spawnRemote[A any](b *testing.B, name string) *actorrt.ActorMesh[A] {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { procs.Stop(ctx) })
	m, err := actorrt.Spawn[A](ctx, procs, name)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// alternate runs ours and floor once each to warm up, then n rounds of
// each, alternating, and returns what each round measured. Which goes
// first changes each round: a cost that comes every other run (a
// collection that a large allocation starts) would otherwise fall on one
// side only.
func alternate(b *testing.B, n int, ours, floor func() float64) (o, f []float64) {
	ours()
	floor()
	b.ResetTimer()
	for r := 0; r < n; r++ {
		if r%2 == 0 {
			o = append(o, ours())
			f = append(f, floor())
		} else {
			f = append(f, floor())
			o = append(o, ours())
		}
	}
	return o, f
}

// latencies times n calls of fn, in microseconds.
func latencies(b *testing.B, n int, fn func() error) []float64 {
	out := make([]float64, n)
	for i := range out {
		t0 := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		out[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	return out
}

// BenchmarkW1CallOne: CallOne round trip to an actor in another proc,
// beside raw NATS request-reply; p50 latency in µs.
func BenchmarkW1CallOne(b *testing.B) {
	ctx := clientCtx
	echo := spawnRemote[Echo](b, "w1")
	raw := newRawBus(b)
	raw.startRaw(b, "raw-rr", 0)
	ours := func() error { _, err := actorrt.Method((*Echo).Ping).CallOne(echo).Get(ctx); return err }
	floor := func() error { _, err := raw.nc.Request("bench.rr", []byte{1}, 5*time.Second); return err }
	pairedLatencies(b, 500, ours, floor) // warm up both paths
	b.ResetTimer()
	o, f := pairedLatencies(b, benchRounds*2000, ours, floor)
	report(b, "W1-callone-p50-us", o, f, "us", "<=", 1.03)
}

// pairedLatencies times n calls of ours and n of floor, in microseconds,
// one of each in turn (which goes first changing each time): on a shared
// machine the load changes within a round of thousands of calls, and
// would fall on one side only.
func pairedLatencies(b *testing.B, n int, ours, floor func() error) (o, f []float64) {
	o, f = make([]float64, n), make([]float64, n)
	for i := range n {
		if i%2 == 0 {
			o[i] = latencies(b, 1, ours)[0]
			f[i] = latencies(b, 1, floor)[0]
		} else {
			f[i] = latencies(b, 1, floor)[0]
			o[i] = latencies(b, 1, ours)[0]
		}
	}
	return o, f
}

// BenchmarkW3Call64: Call on 64 actors in 4 procs, waiting for all 64
// replies, beside a raw NATS fan-out to 64 subscribers in 4 processes
// gathering 64 replies; p50 latency in µs.
func BenchmarkW3Call64(b *testing.B) {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"procs", 4}})
	if err != nil {
		b.Fatal(err)
	}
	defer procs.Stop(ctx)
	echo, err := actorrt.SpawnPerProc[Echo](ctx, procs, "w3", actorrt.Dims{{"actors", 16}})
	if err != nil {
		b.Fatal(err)
	}
	raw := newRawBus(b)
	for i := 0; i < 4; i++ {
		raw.startRaw(b, "raw-fan", 16)
	}
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, 1024)
	sub, err := raw.nc.ChanSubscribe(inbox, replies)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	ours := func() error {
		v, err := actorrt.Method((*Echo).Ping).Call(echo).Get(ctx)
		if err == nil && v.Len() != 64 {
			err = fmt.Errorf("%d replies", v.Len())
		}
		return err
	}
	floor := func() error {
		if err := raw.nc.PublishRequest("bench.fan", inbox, []byte{1}); err != nil {
			return err
		}
		timeout := time.After(5 * time.Second)
		for i := 0; i < 64; i++ {
			select {
			case <-replies:
			case <-timeout:
				return fmt.Errorf("raw fan-out: %d of 64 replies", i)
			}
		}
		return nil
	}
	latencies(b, 200, ours)
	latencies(b, 200, floor)
	var o, f []float64
	b.ResetTimer()
	for r := 0; r < benchRounds; r++ {
		o = append(o, latencies(b, 300, ours)...)
		f = append(f, latencies(b, 300, floor)...)
	}
	report(b, "W3-call64-p50-us", o, f, "us", "<=", 1.5)
}

// BenchmarkW2Broadcast: one-way Broadcast throughput to one actor in
// another proc, beside raw NATS publish to one subscriber in another
// process; messages per second until the receiver has counted them all.
func BenchmarkW2Broadcast(b *testing.B) {
	hit := actorrt.VoidMethod((*Recorder).Hit)
	broadcastRate(b, "W2-broadcast-msgs-per-s", 200000, []byte{1}, 0.7,
		func(rec *actorrt.ActorMesh[Recorder]) error { return hit.Broadcast(rec) })
}

// BenchmarkW2pBroadcast32B is W2 with a 32-byte []byte argument, beside raw
// NATS publish of a 32-byte payload: the receive side decodes an argument
// for every message.
func BenchmarkW2pBroadcast32B(b *testing.B) {
	payload := []byte("0123456789abcdef0123456789abcdef")
	hit := actorrt.VoidMethod1((*Recorder).HitData)
	broadcastRate(b, "W2p-broadcast-32B-msgs-per-s", 1000000, payload, 1.3,
		func(rec *actorrt.ActorMesh[Recorder]) error { return hit.Broadcast(rec, payload) })
}

// BenchmarkW2Send32B: the Send adverb with a 32-byte []byte argument to
// one actor in another proc, each answer going to a channel of the
// sender's, beside raw NATS publish of the same 32 bytes to a counting
// subscriber in another process (broadcastRate's floor); messages per
// second until the sender has every answer. The floor carries no
// answers: Send's are part of what it costs.
func BenchmarkW2Send32B(b *testing.B) {
	payload := []byte("0123456789abcdef0123456789abcdef")
	hit := actorrt.VoidMethod1((*Recorder).HitData)
	port, answers := actorrt.OpenChannel[actorrt.Void](clientCtx)
	b.Cleanup(answers.Close)
	const n = 200000
	broadcastRate(b, "W2-send-32B-msgs-per-s", n, payload, 1.5, func(rec *actorrt.ActorMesh[Recorder]) error {
		return hit.Send(rec, port, payload)
	}, func() {
		for i := 0; i < n; i++ {
			if _, err := answers.Recv().Get(clientCtx); err != nil {
				b.Fatalf("answer %d of %d: %v", i, n, err)
			}
		}
	})
}

// broadcastRate sends n messages with send to a Recorder in another proc,
// and n raw NATS publishes of payload to a counting subscriber in another
// process; the clock stops when the receiver has counted them all (and
// after each wait, if given, has returned).
func broadcastRate(b *testing.B, name string, n int, payload []byte, target float64, send func(*actorrt.ActorMesh[Recorder]) error, wait ...func()) {
	rec := spawnRemote[Recorder](b, "w2")
	raw := newRawBus(b)
	raw.startRaw(b, "raw-sink", 0)
	sent := 0
	ours := func() float64 { return recorderRate(b, rec, n, &sent, send, wait...) }
	rawSent := 0
	floor := func() float64 {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := raw.nc.Publish("bench.sink", payload); err != nil {
				b.Fatal(err)
			}
		}
		rawSent += n
		m, err := raw.nc.Request("bench.sink", nil, 30*time.Second)
		if err != nil || string(m.Data) != strconv.Itoa(rawSent) {
			b.Fatalf("raw sink counted %v of %d: %v", m, rawSent, err)
		}
		return float64(n) / time.Since(t0).Seconds()
	}
	o, f := alternate(b, benchRounds, ours, floor)
	report(b, name, o, f, "msgs/s", ">=", target)
}

// recorderRate sends n messages with send to rec and returns messages
// per second until rec has counted them all and each wait has returned;
// *sent is what rec has had before, and after.
func recorderRate(b *testing.B, rec *actorrt.ActorMesh[Recorder], n int, sent *int, send func(*actorrt.ActorMesh[Recorder]) error, wait ...func()) float64 {
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := send(rec); err != nil {
			b.Fatal(err)
		}
	}
	*sent += n
	for _, w := range wait {
		w()
	}
	got, err := actorrt.Method((*Recorder).Count).CallOne(rec).Get(clientCtx)
	if err != nil || got != *sent {
		b.Fatalf("actor counted %d of %d: %v", got, *sent, err)
	}
	return float64(n) / time.Since(t0).Seconds()
}

// Flooder writes lines as fast as it can.
type Flooder struct{}

func (f *Flooder) Flood(ctx *actorrt.Context, d time.Duration) (int, error) {
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	r := ctx.ActorInstance().Rank().Rank()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 256; i++ {
			fmt.Fprintf(w, "flood %d line %d with some payload to look like a log line\n", r, n)
			n++
		}
	}
	return n, w.Flush()
}

// BenchmarkLogsEndToEnd: 16 procs write as fast as they can for 5 s; every
// line written must reach the client. Printed as received lines/s against
// written lines/s: the ratio must be 1.
func BenchmarkLogsEndToEnd(b *testing.B) {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"procs", 16}})
	if err != nil {
		b.Fatal(err)
	}
	defer procs.Stop(ctx)
	// Recorded, not printed: the benchmark's own output stays readable.
	if err := procs.SetLogOptions(ctx, actorrt.LogOptions{StreamToClient: false}); err != nil {
		b.Fatal(err)
	}
	f, err := actorrt.Spawn[Flooder](ctx, procs, "flooders")
	if err != nil {
		b.Fatal(err)
	}
	before := actorrt.ClientLogStats(clientCtx).Lines
	const d = 5 * time.Second
	t0 := time.Now()
	counts, err := actorrt.Method1((*Flooder).Flood).Call(f, d).Get(ctx)
	if err != nil {
		b.Fatal(err)
	}
	written := 0
	for _, n := range counts.Values() {
		written += n
	}
	// Wait (bounded) until the client has every line.
	for deadline := time.Now().Add(60 * time.Second); actorrt.ClientLogStats(clientCtx).Lines-before < int64(written) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(t0).Seconds()
	received := actorrt.ClientLogStats(clientCtx).Lines - before
	if st := actorrt.ClientLogStats(clientCtx); st.Bad != 0 {
		b.Errorf("%d undecodable log messages", st.Bad)
	}
	fmt.Printf("BENCH logs-e2e-16procs ours=%.0f floor=%.0f ratio=%.3f target>=1.0\n", float64(received)/took, float64(written)/took, float64(received)/float64(written))
	fmt.Printf("logs end to end: %d lines written by 16 procs in %v, %d received by the client\n", written, d, received)
	if received != int64(written) {
		b.Fatalf("%d lines written, %d received", written, received)
	}
}
