package actorrt_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/monarch-go/monarch/ibverbs"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// largeSize is the message of BenchmarkLarge64MiB.
const largeSize = 64 << 20

// BenchmarkLarge64MiB: a 64 MiB []byte argument sent to an actor in another
// proc, which returns it (CallOne of Echo.Bytes), beside a raw loopback TCP
// stream of the same bytes to another process and back: the helper reads
// all 64 MiB before it writes them back, as the actor must have its whole
// argument before it answers. Both count the bytes both ways (128 MiB a
// round trip), in MB/s. As the helper and the floor read into buffers
// they keep, the caller gives each result back once it checked it
// (actorrt.Recycle), and the next one is read into that memory.
func BenchmarkLarge64MiB(b *testing.B) {
	ctx := clientCtx
	echo := spawnRemote[Echo](b, "large")
	data := make([]byte, largeSize)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	conn := startTCPEcho(b)
	back := make([]byte, largeSize)
	mbps := func(d time.Duration) float64 { return 2 * largeSize / 1e6 / d.Seconds() }
	echoBytes := actorrt.Method1((*Echo).Bytes)
	ours := func() float64 {
		t0 := time.Now()
		got, err := echoBytes.CallOne(echo, data).Get(ctx)
		d := time.Since(t0)
		if err != nil || !bytes.Equal(got, data) {
			b.Fatalf("echo of %d bytes: got %d bytes back: %v", len(data), len(got), err)
		}
		actorrt.Recycle(got)
		return mbps(d)
	}
	floor := func() float64 {
		clear(back)
		t0 := time.Now()
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], largeSize)
		if _, err := conn.Write(n[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Write(data); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, back); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		if !bytes.Equal(back, data) {
			b.Fatal("raw TCP echo: the bytes differ")
		}
		return mbps(d)
	}
	o, f := alternate(b, 6, ours, floor)
	report(b, "large-64MiB-MBps", o, f, "MB/s", ">=", 0.5)
}

// BenchmarkLargeBroadcast4MiB: a 4 MiB argument broadcast to one actor in
// each of 4 procs (Call of Echo.Len, waiting for the 4 answers), beside
// the buffers moving the same bytes: the bytes copied into a buffer made
// once, its handle sent to the same 4 actors, each reading it into
// memory of its own (Echo.ReadLen). Milliseconds a round; the target is
// within 3x the buffers.
func BenchmarkLargeBroadcast4MiB(b *testing.B) {
	ctx := clientCtx
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"procs", 4}})
	if err != nil {
		b.Fatal(err)
	}
	defer procs.Stop(ctx)
	echo, err := actorrt.Spawn[Echo](ctx, procs, "bcast")
	if err != nil {
		b.Fatal(err)
	}
	const size = 4 << 20
	data := bytes.Repeat([]byte{7}, size)
	buf, err := ibverbs.NewBuffer(size)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	check := func(v actorrt.ValueMesh[int], err error) {
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range v.Values() {
			if n != size+7 {
				b.Fatalf("a member read %d", n)
			}
		}
	}
	length, readLen := actorrt.Method1((*Echo).Len), actorrt.Method1((*Echo).ReadLen)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ours := func() float64 {
		t0 := time.Now()
		check(length.Call(echo, data).Get(ctx))
		return ms(time.Since(t0))
	}
	floor := func() float64 {
		t0 := time.Now()
		copy(buf.Bytes(), data)
		check(readLen.Call(echo, buf.Handle()).Get(ctx))
		return ms(time.Since(t0))
	}
	o, f := alternate(b, 16, ours, floor)
	report(b, "large-bcast-4MiB-4procs-ms", o, f, "ms", "<=", 3)
}

// startTCPEcho runs the raw-tcp-echo helper and returns its connection.
func startTCPEcho(b *testing.B) net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "MONARCH_TEST_HELPER=raw-tcp-echo", "RAW_URL="+ln.Addr().String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		b.Fatalf("raw TCP echo helper: %v", err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// runTCPEcho is the raw-tcp-echo helper: it reads a length and that many
// bytes, then writes them back, until the connection ends.
func runTCPEcho() int {
	conn, err := net.Dial("tcp", os.Getenv("RAW_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var buf []byte
	for {
		var n [8]byte
		if _, err := io.ReadFull(conn, n[:]); err != nil {
			return 0
		}
		size := binary.BigEndian.Uint64(n[:])
		if size > 1<<30 {
			fmt.Fprintln(os.Stderr, "raw-tcp-echo: size", size)
			return 1
		}
		if uint64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(conn, buf); err != nil {
			return 0
		}
		if _, err := conn.Write(buf); err != nil {
			return 0
		}
	}
}
