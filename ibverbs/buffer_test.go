package ibverbs_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The test binary doubles as a buffer owner in another process: it makes
// a buffer, fills it, prints its handle, then answers "sum" with the
// buffer's digest and "close" by closing it.
func TestMain(m *testing.M) {
	if addr := os.Getenv("IBVERBS_FLOOD"); addr != "" {
		// Before Setup: it runs as another user, with nothing of the
		// test's.
		os.Exit(flood(addr))
	}
	env := testenv.Setup()
	if os.Getenv("IBVERBS_OWNER") != "" {
		os.Exit(owner())
	}
	if os.Getenv("IBVERBS_ADDER") != "" {
		os.Exit(adder())
	}
	if os.Getenv("IBVERBS_WAKER") != "" {
		os.Exit(waker())
	}
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(env.Finish(code))
}

func owner() int {
	size := 4 << 20
	fmt.Sscan(os.Getenv("IBVERBS_SIZE"), &size)
	newBuffer := ibverbs.NewBuffer
	var mine []byte // the program's own memory, with IBVERBS_REGISTER
	if os.Getenv("IBVERBS_REGISTER") != "" {
		newBuffer = func(size int) (*ibverbs.Buffer, error) {
			mine = make([]byte, size)
			return ibverbs.Register(mine)
		}
	}
	b, err := newBuffer(size)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	pattern(b.Bytes(), 1)
	h, _ := json.Marshal(b.Handle())
	fmt.Printf("HANDLE %s\n", h)
	// IBVERBS_BUFFERS=n: n-1 more buffers of the size, buffer i filled
	// with pattern seed i+1; the commands below act on the first.
	n := 1
	fmt.Sscan(os.Getenv("IBVERBS_BUFFERS"), &n)
	for i := 1; i < n; i++ {
		more, err := newBuffer(size)
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		pattern(more.Bytes(), byte(i+1))
		h, _ := json.Marshal(more.Handle())
		fmt.Printf("HANDLE %s\n", h)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "sum":
			s := sha256.Sum256(b.Bytes())
			fmt.Println("SUM", hex.EncodeToString(s[:]))
		case "close":
			b.Close()
			fmt.Println("CLOSED")
		case "renew":
			// Another buffer of the size in the place of this one (the
			// kernel hands out the lowest fd free: its fd, most likely).
			b.Close()
			if b, err = newBuffer(size); err != nil {
				fmt.Println("ERR", err)
				continue
			}
			pattern(b.Bytes(), 9)
			h, _ := json.Marshal(b.Handle())
			fmt.Printf("HANDLE %s\n", h)
		case "raw":
			// The floor of a transfer: the buffer's bytes on one plain
			// TCP stream to whoever connects first.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				fmt.Println("ERR", err)
				continue
			}
			fmt.Println("RAW", ln.Addr())
			if c, err := ln.Accept(); err == nil {
				c.Write(b.Bytes())
				c.Close()
			}
			ln.Close()
		case "poke":
			// The program writes its own memory: a registered buffer
			// is that memory, not a copy of it.
			mine[0] ^= 0xff
			fmt.Println("POKED")
		}
	}
	return 0
}

func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
}

type ownerProc struct {
	cmd *exec.Cmd
	in  *os.File
	out *bufio.Scanner
	h   ibverbs.Handle
	hs  []ibverbs.Handle // all its buffers' (startOwnerBuffers), h first
}

func startOwner(t *testing.T) *ownerProc { return startOwnerSize(t, 4<<20) }

func startOwnerSize(t testing.TB, size int) *ownerProc { return startOwnerBuffers(t, 1, size) }

// startOwnerEnv starts an owner of a buffer of size bytes, with env added
// to its environment.
func startOwnerEnv(t testing.TB, size int, env ...string) *ownerProc {
	return startOwnerBuffers(t, 1, size, env...)
}

// startOwnerBuffers starts an owner of n buffers of size bytes, buffer i
// filled with pattern seed i+1, with env added to its environment.
func startOwnerBuffers(t testing.TB, n, size int, env ...string) *ownerProc {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "IBVERBS_OWNER=1", fmt.Sprintf("IBVERBS_SIZE=%d", size), fmt.Sprintf("IBVERBS_BUFFERS=%d", n))
	cmd.Env = append(cmd.Env, env...)
	pr, pw, _ := os.Pipe()
	cmd.Stdin = pr
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	t.Cleanup(func() { pw.Close(); cmd.Process.Kill(); cmd.Wait() })
	o := &ownerProc{cmd: cmd, in: pw, out: bufio.NewScanner(out)}
	for range n {
		line := o.line(t)
		js, ok := strings.CutPrefix(line, "HANDLE ")
		if !ok {
			t.Fatalf("owner said %q", line)
		}
		var h ibverbs.Handle
		if err := json.Unmarshal([]byte(js), &h); err != nil {
			t.Fatal(err)
		}
		o.hs = append(o.hs, h)
	}
	o.h = o.hs[0]
	return o
}

func (o *ownerProc) line(t testing.TB) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if o.out.Scan() {
			got <- o.out.Text()
		}
		close(got)
	}()
	select {
	case l := <-got:
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("owner silent for 20s")
		return ""
	}
}

func (o *ownerProc) ask(t *testing.T, cmd string) string {
	t.Helper()
	fmt.Fprintln(o.in, cmd)
	return o.line(t)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return "SUM " + hex.EncodeToString(s[:])
}

// eachBackend runs f in a subtest per backend, which it forces, with a
// buffer owner started under it.
func eachBackend(t *testing.T, f func(t *testing.T, backend string, o *ownerProc)) {
	for _, backend := range []string{"shm", "tcp"} {
		t.Run(backend, func(t *testing.T) {
			t.Setenv(ibverbs.EnvBackend, backend)
			f(t, backend, startOwner(t))
		})
	}
}

// TestOneSided reads and writes another process's buffer, through each
// backend, without that process doing anything but exist.
func TestOneSided(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, backend string, o *ownerProc) {
		if got := o.h.Backend(); got != backend {
			t.Fatalf("Backend() = %s", got)
		}
		want := make([]byte, o.h.Size)
		pattern(want, 1)
		got := make([]byte, o.h.Size)
		if err := o.h.ReadInto(ctx, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("read different bytes")
		}
		// A shorter read takes the start.
		part := make([]byte, 1000)
		if err := o.h.ReadInto(ctx, part); err != nil || !bytes.Equal(part, want[:1000]) {
			t.Fatalf("partial read: %v", err)
		}
		pattern(want, 2)
		if err := o.h.WriteFrom(ctx, want); err != nil {
			t.Fatal(err)
		}
		if s := o.ask(t, "sum"); s != sum(want) {
			t.Fatalf("owner holds %s after the write, want %s", s, sum(want))
		}
		if err := o.h.ReadInto(ctx, make([]byte, o.h.Size+1)); !errors.Is(err, ibverbs.ErrRange) {
			t.Fatalf("oversized read: %v", err)
		}
		if o.ask(t, "close") != "CLOSED" {
			t.Fatal("owner did not close")
		}
		if err := o.h.ReadInto(ctx, got); !errors.Is(err, ibverbs.ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
	})
}

// TestRanges reads and writes spans inside another process's buffer,
// through each backend: the offsets the backends take.
func TestRanges(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, _ string, o *ownerProc) {
		want := make([]byte, o.h.Size)
		pattern(want, 1)
		got := make([]byte, 1000)
		if err := ibverbs.ReadAt(ctx, o.h, 5000, got); err != nil || !bytes.Equal(got, want[5000:6000]) {
			t.Fatalf("read at 5000: %v", err)
		}
		if err := ibverbs.ReadAt(ctx, o.h, o.h.Size-10, got[:10]); err != nil || !bytes.Equal(got[:10], want[o.h.Size-10:]) {
			t.Fatalf("read of the last bytes: %v", err)
		}
		patch := bytes.Repeat([]byte{0xab}, 3000)
		if err := ibverbs.WriteAt(ctx, o.h, 12345, patch); err != nil {
			t.Fatal(err)
		}
		copy(want[12345:], patch)
		if s := o.ask(t, "sum"); s != sum(want) {
			t.Fatalf("owner holds %s after the write at 12345, want %s", s, sum(want))
		}
		for _, off := range []int{-1, o.h.Size - 5, o.h.Size + 1} {
			if err := ibverbs.ReadAt(ctx, o.h, off, got[:10]); !errors.Is(err, ibverbs.ErrRange) {
				t.Fatalf("read of 10 bytes at %d: %v", off, err)
			}
		}
		// A handle that overstates the size: the owner's memory (its
		// server for tcp, the mapping the reads above made for shm)
		// still bounds the span.
		lying := o.h
		lying.Size *= 2
		if err := ibverbs.ReadAt(ctx, lying, o.h.Size, got[:10]); !errors.Is(err, ibverbs.ErrRange) {
			t.Fatalf("read past the owner's memory: %v", err)
		}
	})
}

func TestOwnBuffer(t *testing.T) {
	b, err := ibverbs.NewBuffer(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	pattern(b.Bytes(), 3)
	got := make([]byte, 1<<10)
	if err := b.Handle().ReadInto(context.Background(), got); err != nil || !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("read own buffer: %v", err)
	}
	b.Close()
	b.Close()
	if err := b.Handle().ReadInto(context.Background(), got); !errors.Is(err, ibverbs.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := ibverbs.NewBuffer(0); !errors.Is(err, ibverbs.ErrRange) {
		t.Fatalf("size 0: %v", err)
	}
}

// TestUnreachableOwner: a handle whose owner is gone fails, bounded.
func TestUnreachableOwner(t *testing.T) {
	t.Setenv(ibverbs.EnvBackend, "tcp")
	h := ibverbs.Handle{Size: 10, Key: 1, Addr: "127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.ReadInto(ctx, make([]byte, 10)); err == nil {
		t.Fatal("read from nowhere succeeded")
	}
}
