package collective_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
	"github.com/monarch-go/monarch/ibverbs"
)

// Timed all-reduces its N float32s and returns how long that took here.
func (w *Worker) Timed(ctx *actorrt.Context, j Job) (float64, error) {
	data := make([]float32, j.N)
	for i := range data {
		data[i] = float32(i % 1000)
	}
	t0 := time.Now()
	err := collective.AllReduce(ctx, &j.Comm, j.Dim, data, collective.Sum)
	return time.Since(t0).Seconds(), err
}

// Serve sends n bytes on one plain TCP stream to the first to connect,
// and returns where to connect.
func (w *Worker) Serve(ctx *actorrt.Context, n int) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		defer ln.Close()
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute))
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(make([]byte, n))
	}()
	return ln.Addr().String(), nil
}

// Fetch reads n bytes from addr and returns how long that took.
func (w *Worker) Fetch(ctx *actorrt.Context, addr string, n int) (float64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, n)
	t0 := time.Now()
	_, err = io.ReadFull(c, buf)
	return time.Since(t0).Seconds(), err
}

// BenchmarkAllReduce64MiB: all-reduce of 64 MiB of float32 on 4 procs
// (one host), each backend, as algorithm bandwidth (bytes / time of the
// slowest member), beside the floors of the same run: a raw TCP stream of
// 64 MiB between two of the procs, and a memcpy of 64 MiB. GB/s, medians.
func BenchmarkAllReduce64MiB(b *testing.B) {
	const n = 16 << 20 // float32s: 64 MiB
	const size = 4 * n
	ctx := clientCtx
	for _, backend := range []string{"shm", "tcp"} {
		c, w, procs := benchProcs(b, backend)
		timed := actorrt.Method1((*Worker).Timed)
		ours := func() float64 {
			ts, err := timed.Call(w, Job{Comm: *c, Dim: "gpus", N: n}).Get(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return size / slices.Max(ts.Values()) / 1e9
		}
		tcp := func() float64 {
			addr, err := actorrt.Method1((*Worker).Serve).CallOne(w.Slice("gpus", 0, 1), size).Get(ctx)
			if err != nil {
				b.Fatal(err)
			}
			s, err := actorrt.Method2((*Worker).Fetch).CallOne(w.Slice("gpus", 1, 2), addr, size).Get(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return size / s / 1e9
		}
		src, dst := make([]byte, size), make([]byte, size)
		for i := range src {
			src[i], dst[i] = byte(i), byte(i>>8)
		}
		memcpy := func() float64 { t0 := time.Now(); copy(dst, src); return size / time.Since(t0).Seconds() / 1e9 }
		ours()
		var o, ft, fm []float64
		for r := 0; r < 5; r++ {
			o, ft, fm = append(o, ours()), append(ft, tcp()), append(fm, memcpy())
		}
		om := median(o)
		fmt.Printf("BENCH allreduce-64MiB-4procs-%s-vs-tcp-GBps ours=%.2f floor=%.2f ratio=%.3f target>=0.5\n", backend, om, median(ft), om/median(ft))
		fmt.Printf("BENCH allreduce-64MiB-4procs-%s-vs-memcpy-GBps ours=%.2f floor=%.2f ratio=%.3f target>=0.1\n", backend, om, median(fm), om/median(fm))
		procs.Stop(ctx)
	}
}

// benchProcs spawns 4 procs on this host, forced to backend, with a
// communicator and a worker each (within 2 minutes).
func benchProcs(b *testing.B, backend string) (*collective.Comm, *actorrt.ActorMesh[Worker], *actorrt.ProcMesh) {
	ctx, cancel := context.WithTimeout(clientCtx, 2*time.Minute)
	defer cancel()
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}},
		actorrt.WithProcEnv(func(actorrt.Point) []string { return []string{"MONARCH_RDMA_BACKEND=" + backend} }))
	if err != nil {
		b.Fatal(err)
	}
	c, err := collective.New(ctx, procs)
	if err != nil {
		b.Fatal(err)
	}
	w, err := actorrt.Spawn[Worker](ctx, procs, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return c, w, procs
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// AllReduceLoop all-reduces its N float32s Reps times and returns how
// long each took here, in seconds.
func (w *Worker) AllReduceLoop(ctx *actorrt.Context, j Job, reps int) ([]float64, error) {
	data := make([]float32, j.N)
	ts := make([]float64, reps)
	for r := range ts {
		for i := range data {
			data[i] = float32(i % 1000)
		}
		t0 := time.Now()
		if err := collective.AllReduce(ctx, &j.Comm, j.Dim, data, collective.Sum); err != nil {
			return nil, err
		}
		ts[r] = time.Since(t0).Seconds()
	}
	return ts, nil
}

// pingBuf is this proc's buffer of the ping-pong floor.
var pingBuf *ibverbs.Buffer

// PingBuffer makes this proc's ping-pong buffer and returns its handle.
func (w *Worker) PingBuffer(ctx *actorrt.Context) (ibverbs.Handle, error) {
	b, err := ibverbs.NewBuffer(64)
	pingBuf = b
	if err != nil {
		return ibverbs.Handle{}, err
	}
	return b.Handle(), nil
}

// PingJob is one side of a ping-pong.
type PingJob struct {
	Peer  ibverbs.Handle `msgpack:"peer"`
	First bool           `msgpack:"first"`
	Reps  int            `msgpack:"reps"`
}

// PingPong bats a fetch-and-add back and forth with j.Peer, Reps times:
// the first side adds to the peer's word 0 and waits for its own word 0
// to grow, the other waits, then adds; each waits as a collective does
// (blocks on the word). It returns the first side's
// round trips, in seconds.
func (w *Worker) PingPong(ctx *actorrt.Context, j PingJob) ([]float64, error) {
	words, err := ibverbs.View[uint64](pingBuf)
	if err != nil {
		return nil, err
	}
	wait := func(want uint64) error {
		t0 := time.Now()
		for {
			v := atomic.LoadUint64(&words[0])
			switch {
			case v >= want:
				return nil
			case time.Since(t0) > time.Minute:
				return fmt.Errorf("ping-pong: nothing for a minute")
			default:
				pingBuf.Wait(0, v, 100*time.Millisecond)
			}
		}
	}
	var ts []float64
	for i := range uint64(j.Reps) {
		t0 := time.Now()
		if !j.First {
			if err := wait(i + 1); err != nil {
				return nil, err
			}
		}
		if _, err := j.Peer.FetchAdd(ctx, 0, 1); err != nil {
			return nil, err
		}
		if j.First {
			if err := wait(i + 1); err != nil {
				return nil, err
			}
			ts = append(ts, time.Since(t0).Seconds())
		}
	}
	return ts, nil
}

// BenchmarkAllReduce1KiB: the latency of an all-reduce of 1 KiB of
// float32 on 4 procs of one host (the direct path), each backend: the
// p50 over 300 rounds of the slowest member's time, in microseconds,
// beside its floor in the same run: the p50 round trip of a one-sided
// fetch-and-add that wakes a waiting peer, answered the same way,
// between two of the procs through the same backend. The all-reduce
// needs more than one: each of the 4 members is woken by the 3 others,
// 12 such messages on this host's 2 cores, 6 round trips' worth each,
// and waits for the slowest: target 25 floors, which on shm is the
// issue's "a few hundred microseconds at most".
func BenchmarkAllReduce1KiB(b *testing.B) {
	const n, reps = 256, 300
	ctx := clientCtx
	for _, backend := range []string{"shm", "tcp"} {
		c, w, procs := benchProcs(b, backend)
		ts, err := actorrt.Method2((*Worker).AllReduceLoop).Call(w, Job{Comm: *c, Dim: "gpus", N: n}, reps).Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		slowest := make([]float64, reps)
		for _, t := range ts.Values() {
			for r := range slowest {
				slowest[r] = max(slowest[r], t[r])
			}
		}
		ours := median(slowest[10:]) * 1e6

		pair := w.Slice("gpus", 0, 2)
		hs, err := actorrt.Method((*Worker).PingBuffer).Call(pair).Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		h := hs.Values()
		pp := actorrt.Method1((*Worker).PingPong)
		second := pp.Call(w.Slice("gpus", 1, 2), PingJob{Peer: h[0], Reps: reps})
		first, err := pp.Call(w.Slice("gpus", 0, 1), PingJob{Peer: h[1], First: true, Reps: reps}).Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := second.Get(ctx); err != nil {
			b.Fatal(err)
		}
		floor := median(first.Values()[0][10:]) * 1e6
		fmt.Printf("BENCH allreduce-1KiB-4procs-%s-p50-us ours=%.1f floor=%.1f ratio=%.2f target<=25\n", backend, ours, floor, ours/floor)
		procs.Stop(ctx)
	}
}
