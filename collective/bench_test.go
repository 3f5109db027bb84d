package collective_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/collective"
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
	ctx := context.Background()
	for _, backend := range []string{"shm", "tcp"} {
		procs, err := actorrt.ThisHost().SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}},
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

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
