package ibverbs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
)

// The mappings the shm backend keeps of another process's buffers, on
// real memfd buffers of a real owner process: bounded, never unmapped
// under a transfer, let go by Forget.

// TestShmCacheBound reads every one of an owner's 24 buffers once, and
// some again, under each bound: this process keeps at most the bound's
// worth of them mapped (in its cache and in /proc/self/maps), the least
// recently used going first.
func TestShmCacheBound(t *testing.T) {
	const n, size = 24, 64 << 10
	for _, tt := range []struct {
		name     string
		mappings int
		bytes    int64
		kept     int // the mappings that fit both bounds
	}{
		{name: "mappings", mappings: 4, bytes: 1 << 40, kept: 4},
		{name: "bytes", mappings: 100, bytes: 3 * size, kept: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(ibverbs.EnvBackend, "shm")
			t.Cleanup(ibverbs.SetPeerBounds(tt.mappings, tt.bytes))
			o := startOwnerBuffers(t, n, size)
			inodes := memfdInodes(t, o.hs)
			read := func(i int) {
				t.Helper()
				got := make([]byte, size)
				if err := o.hs[i].ReadInto(context.Background(), got); err != nil {
					t.Fatalf("read of buffer %d: %v", i, err)
				}
				if want := patterned(size, byte(i+1)); !bytes.Equal(got, want) {
					t.Fatalf("buffer %d read different bytes", i)
				}
				if k, b := ibverbs.PeerMappings(); k > tt.kept || b > tt.bytes {
					t.Fatalf("after buffer %d: %d mappings of %d bytes kept, want at most %d of %d", i, k, b, tt.kept, tt.bytes)
				}
				if m := mappedMemfds(t, inodes); m > tt.kept {
					t.Fatalf("after buffer %d: %d of the owner's memfds in /proc/self/maps, want at most %d", i, m, tt.kept)
				}
			}
			for i := range tt.kept {
				read(i)
			}
			// Buffer 0 used again: buffer 1 is now the least recently
			// used, and the next new mapping evicts it.
			read(0)
			read(tt.kept)
			if !ibverbs.Mapped(o.hs[0]) || ibverbs.Mapped(o.hs[1]) {
				t.Fatalf("evicted buffer 0 (%v) and kept buffer 1 (%v), want the opposite", !ibverbs.Mapped(o.hs[0]), ibverbs.Mapped(o.hs[1]))
			}
			for i := range n {
				read(i)
			}
			for i := range n {
				if want := i >= n-tt.kept; ibverbs.Mapped(o.hs[i]) != want {
					t.Errorf("buffer %d mapped: %v, want %v (the last %d read)", i, !want, want, tt.kept)
				}
			}
		})
	}
}

// TestShmEvictUnderTransfers: 8 goroutines read (and run atomics on) 32
// buffers of an owner, each goroutine in its own order, while at most 4
// mappings are kept, so that mappings are evicted under transfers all
// along: none faults, and every transfer sees its own buffer's bytes.
func TestShmEvictUnderTransfers(t *testing.T) {
	const n, size, workers, ops = 32, 256 << 10, 8, 300
	t.Setenv(ibverbs.EnvBackend, "shm")
	t.Cleanup(ibverbs.SetPeerBounds(4, 1<<40))
	o := startOwnerBuffers(t, n, size)
	want := make([][]byte, n)
	for i := range want {
		want[i] = patterned(size, byte(i+1))
	}
	ctx := context.Background()
	errs := make(chan error, workers)
	run(t, workers, func(w int) {
		got := make([]byte, size)
		for j := range ops {
			i := (w*131 + j*17) % n
			h := o.hs[i]
			switch j % 3 {
			case 0:
				if err := h.ReadInto(ctx, got); err != nil || !bytes.Equal(got, want[i]) {
					errs <- fmt.Errorf("read of buffer %d: %v (or different bytes)", i, err)
					return
				}
			case 1:
				off := (j * 4096) % (size - 1000)
				if err := h.ReadAt(ctx, got[:1000], off); err != nil || !bytes.Equal(got[:1000], want[i][off:off+1000]) {
					errs <- fmt.Errorf("read of buffer %d at %d: %v (or different bytes)", i, off, err)
					return
				}
			case 2:
				// Adding 0 leaves the word as the reads expect it.
				off := 8 * (j % 64)
				v, err := h.FetchAdd(ctx, off, 0)
				if err != nil || v != binary.LittleEndian.Uint64(want[i][off:]) {
					errs <- fmt.Errorf("fetch-and-add 0 on buffer %d at %d: %x, %v", i, off, v, err)
					return
				}
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if k, _ := ibverbs.PeerMappings(); k > 4 {
		t.Errorf("%d mappings kept, want at most 4", k)
	}
	if m := mappedMemfds(t, memfdInodes(t, o.hs)); m > 4 {
		t.Errorf("%d of the owner's memfds in /proc/self/maps with no transfer under way, want at most 4", m)
	}
}

// TestShmCloseDuringRead: the owner closes a buffer while a goroutine
// copies from it, and a transfer from another goroutine then finds it
// closed and drops its mapping: the copy under way completes with the
// buffer's bytes (the mapping is unmapped after it, not under it), and
// later reads fail with ErrClosed.
func TestShmCloseDuringRead(t *testing.T) {
	// Large, so that a copy is under way when the owner closes (the
	// reader copies nearly all the time) and still is when the other
	// goroutine's read finds the buffer gone, microseconds later.
	const size = 64 << 20
	ctx := context.Background()
	t.Setenv(ibverbs.EnvBackend, "shm")
	o := startOwnerSize(t, size)
	inodes := memfdInodes(t, o.hs)
	want := patterned(size, 1)
	var reads atomic.Int64
	done := make(chan error, 1)
	go func() {
		got := make([]byte, size)
		for j := 0; ; j++ {
			err := o.h.ReadInto(ctx, got)
			if errors.Is(err, ibverbs.ErrClosed) {
				done <- nil
				return
			}
			if err != nil {
				done <- fmt.Errorf("read %d: %v", j, err)
				return
			}
			// A sample of the bytes: a full comparison would keep the
			// goroutine out of the copy as long as in it.
			for i := 0; i < size; i += 4093 {
				if got[i] != want[i] {
					done <- fmt.Errorf("read %d: byte %d is %x, want %x", j, i, got[i], want[i])
					return
				}
			}
			reads.Add(1)
		}
	}()
	// Past the first reads, slowed by the mapping and the faults of new
	// memory: the reader is in its steady loop.
	for deadline := time.Now().Add(time.Minute); reads.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reader has not read twice in a minute")
		}
	}
	fmt.Fprintln(o.in, "close")
	var b [1]byte
	for deadline := time.Now().Add(time.Minute); ; {
		err := o.h.ReadAt(ctx, b[:], 0)
		if errors.Is(err, ibverbs.ErrClosed) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("reading while the owner closes: %v", err)
		}
		time.Sleep(50 * time.Microsecond) // leave the owner a core to close on
	}
	if got := o.line(t); got != "CLOSED" {
		t.Fatalf("owner said %q to close", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the reader still reads a minute after close")
	}
	if ibverbs.Mapped(o.h) || mappedMemfds(t, inodes) != 0 {
		t.Error("the closed buffer is still mapped")
	}
}

// TestForget: Forget drops h's binding (a later use binds afresh, under
// what MONARCH_RDMA_BACKEND says then) and its mapping (gone from
// /proc/self/maps), a later read maps again, and reads under way while
// another goroutine keeps forgetting h all get their bytes.
func TestForget(t *testing.T) {
	const size = 8 << 20
	ctx := context.Background()
	ibverbs.Handle{}.Forget() // a handle never used: nothing to let go
	o := startOwnerSize(t, size)
	want := patterned(size, 1)
	inodes := memfdInodes(t, o.hs)

	t.Setenv(ibverbs.EnvBackend, "tcp")
	if got := o.h.Backend(); got != "tcp" {
		t.Fatalf("Backend() = %s, want tcp", got)
	}
	o.h.Forget()
	t.Setenv(ibverbs.EnvBackend, "shm")
	if got := o.h.Backend(); got != "shm" {
		t.Fatalf("after Forget, Backend() = %s, want shm as now forced", got)
	}

	got := make([]byte, size)
	if err := o.h.ReadInto(ctx, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read: %v", err)
	}
	if !ibverbs.Mapped(o.h) || mappedMemfds(t, inodes) != 1 {
		t.Fatalf("after a read: mapped %v, in /proc/self/maps %d times, want true, 1", ibverbs.Mapped(o.h), mappedMemfds(t, inodes))
	}
	o.h.Forget()
	o.h.Forget()
	if ibverbs.Mapped(o.h) || mappedMemfds(t, inodes) != 0 {
		t.Fatalf("after Forget: mapped %v, in /proc/self/maps %d times, want false, 0", ibverbs.Mapped(o.h), mappedMemfds(t, inodes))
	}
	if err := o.h.ReadInto(ctx, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after Forget: %v", err)
	}

	const readers, reads = 4, 20
	stop := make(chan struct{})
	forgot := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				forgot <- n
				return
			default:
				o.h.Forget()
				n++
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	errs := make(chan error, readers)
	run(t, readers, func(int) {
		got := make([]byte, size)
		for j := range reads {
			if err := o.h.ReadInto(ctx, got); err != nil || !bytes.Equal(got, want) {
				errs <- fmt.Errorf("read %d under Forget: %v (or different bytes)", j, err)
				return
			}
		}
	})
	close(stop)
	t.Logf("Forget called %d times under %d reads", <-forgot, readers*reads)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	o.h.Forget()
	if m := mappedMemfds(t, inodes); m != 0 {
		t.Errorf("after the reads and a last Forget, the memfd is in /proc/self/maps %d times", m)
	}
}

// run runs f(0) to f(n-1) in goroutines and waits for them, a minute at
// most.
func run(t *testing.T, n int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("goroutines still running after a minute")
	}
}

func patterned(size int, seed byte) []byte {
	b := make([]byte, size)
	pattern(b, seed)
	return b
}

// memfdInodes are the inodes of hs's memfds, as their owner's fds show.
func memfdInodes(t *testing.T, hs []ibverbs.Handle) map[uint64]bool {
	t.Helper()
	inodes := map[uint64]bool{}
	for _, h := range hs {
		fi, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", h.PID, h.FD))
		if err != nil {
			t.Fatal(err)
		}
		inodes[fi.Sys().(*syscall.Stat_t).Ino] = true
	}
	return inodes
}

// mappedMemfds is how many of the memfds (named "monarch-rdma") with
// these inodes this process maps now, as /proc/self/maps lists them.
func mappedMemfds(t *testing.T, inodes map[uint64]bool) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[uint64]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.Contains(fields[5], "monarch-rdma") {
			continue
		}
		ino, err := strconv.ParseUint(fields[4], 10, 64)
		if err == nil && inodes[ino] {
			seen[ino] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return len(seen)
}

// TestShmHandleOfAClosedBuffer: a handle read for the first time after
// its owner closed the buffer and made another of the same size at the
// same fd fails with ErrClosed; it never reads the other buffer's bytes.
func TestShmHandleOfAClosedBuffer(t *testing.T) {
	t.Setenv(ibverbs.EnvBackend, "shm")
	o := startOwnerSize(t, 1<<20)
	old := o.h
	line := o.ask(t, "renew")
	js, ok := strings.CutPrefix(line, "HANDLE ")
	if !ok {
		t.Fatalf("owner said %q", line)
	}
	var renewed ibverbs.Handle
	if err := json.Unmarshal([]byte(js), &renewed); err != nil {
		t.Fatal(err)
	}
	if renewed.FD != old.FD {
		t.Skipf("the new buffer took fd %d, not %d: nothing to confuse", renewed.FD, old.FD)
	}
	got := make([]byte, old.Size)
	if err := old.ReadInto(context.Background(), got); !errors.Is(err, ibverbs.ErrClosed) {
		t.Fatalf("reading the closed buffer's handle: %v (first bytes %v); want ErrClosed", err, got[:4])
	}
	if err := renewed.ReadInto(context.Background(), got); err != nil {
		t.Fatal(err)
	}
}
