package ibverbs_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"
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

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
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
