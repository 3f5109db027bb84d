package ibverbs_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
)

// BenchmarkTransfer reads 64 MiB from another process's buffer through
// each backend, beside the floor of the same run: memcpy of 64 MiB for
// shm, a plain TCP stream of 64 MiB over loopback for tcp. GB/s, medians.
func BenchmarkTransfer(b *testing.B) {
	const size = 64 << 20
	floors := map[string]func(dst, src []byte) time.Duration{
		"shm": func(dst, src []byte) time.Duration { t0 := time.Now(); copy(dst, src); return time.Since(t0) },
		"tcp": tcpFloor,
	}
	for _, backend := range []string{"shm", "tcp"} {
		b.Run(backend, func(b *testing.B) {
			b.Setenv("MONARCH_RDMA_BACKEND", backend)
			o := startOwnerSize(b, size)
			dst, src := make([]byte, size), make([]byte, size)
			// Touch every page: untouched memory reads as the shared zero
			// page, which would make the floor a cache benchmark.
			for i := range src {
				src[i], dst[i] = byte(i), byte(i>>8)
			}
			var ours, floor []float64
			for r := 0; r < 7; r++ {
				t0 := time.Now()
				if err := o.h.ReadInto(context.Background(), dst); err != nil {
					b.Fatal(err)
				}
				ours = append(ours, size/time.Since(t0).Seconds()/1e9)
				floor = append(floor, size/floors[backend](dst, src).Seconds()/1e9)
			}
			om, fm := median(ours), median(floor)
			fmt.Printf("BENCH rdma-%s-read-GBps ours=%.2f floor=%.2f ratio=%.3f target>=%.1f\n", backend, om, fm, om/fm, map[string]float64{"shm": 0.8, "tcp": 0.7}[backend])
		})
	}
}

// BenchmarkTCPStreams256MiB reads a 256 MiB buffer of another process
// over the tcp backend, cut into parallel streams (DefaultTCPStreams),
// beside the floor of the same run: the same bytes on one plain TCP
// stream from that process. GB/s, medians; parallel streams should beat
// one.
func BenchmarkTCPStreams256MiB(b *testing.B) {
	const size = 256 << 20
	b.Setenv("MONARCH_RDMA_BACKEND", "tcp")
	o := startOwnerSize(b, size)
	dst := make([]byte, size)
	for i := range dst {
		dst[i] = byte(i >> 8)
	}
	ours := func() float64 {
		t0 := time.Now()
		if err := o.h.ReadInto(context.Background(), dst); err != nil {
			b.Fatal(err)
		}
		return size / time.Since(t0).Seconds() / 1e9
	}
	floor := func() float64 {
		fmt.Fprintln(o.in, "raw")
		addr, ok := strings.CutPrefix(o.line(b), "RAW ")
		if !ok {
			b.Fatal("the owner did not serve a raw stream")
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		t0 := time.Now()
		if _, err := io.ReadFull(c, dst); err != nil {
			b.Fatal(err)
		}
		return size / time.Since(t0).Seconds() / 1e9
	}
	ours()
	floor()
	var o1, f1 []float64
	for r := 0; r < 5; r++ {
		o1, f1 = append(o1, ours()), append(f1, floor())
	}
	om, fm := median(o1), median(f1)
	streams := ibverbs.DefaultTCPStreams
	fmt.Sscan(os.Getenv(ibverbs.EnvTCPStreams), &streams)
	fmt.Printf("BENCH rdma-tcp-256MiB-%dstreams-GBps ours=%.2f floor=%.2f ratio=%.3f target>=1.0\n", streams, om, fm, om/fm)
}

func median(xs []float64) float64 { return percentile(xs, 0.5) }

// percentile is the value below which the fraction p of xs lie.
func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}

// tcpFloor streams len(src) bytes over a loopback TCP connection.
func tcpFloor(dst, src []byte) time.Duration {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write(src)
		c.Close()
	}()
	c, _ := net.Dial("tcp", ln.Addr().String())
	defer c.Close()
	t0 := time.Now()
	io.ReadFull(c, dst)
	return time.Since(t0)
}
