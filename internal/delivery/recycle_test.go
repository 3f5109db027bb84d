package delivery

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
)

func data(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestRecycleReuse: memory a payload was read into, given back through
// any slice of it, is what the next payload of about its size is read
// into, all of it; it is taken back once, and memory no payload was read
// into is not taken at all.
func TestRecycleReuse(t *testing.T) {
	p := &recyclePool{cap: 8 << 20, idle: time.Minute}
	first := p.fresh(make([]byte, 1<<20))
	if p.put(make([]byte, 1<<20)) {
		t.Fatal("memory no payload was read into was taken")
	}
	if !p.put(first[5 : 1<<19]) {
		t.Fatal("a payload's memory, given back through a slice of it, was not taken")
	}
	if p.put(first[5:10]) || p.put(first) {
		t.Fatal("a payload's memory was taken back twice")
	}
	if p.bytes != 1<<20 {
		t.Fatalf("the pool holds %d bytes, want %d", p.bytes, 1<<20)
	}
	if b := p.take(2<<20 + 1); b != nil {
		t.Fatal("memory of 1 MiB taken for a payload of more than 2 MiB")
	}
	if b := p.take(300 << 10); b != nil {
		t.Fatal("memory of 1 MiB taken for a payload of less than half its size")
	}
	second := p.take(1<<20 - 3)
	if second == nil || data(second) != data(first) || len(second) != 1<<20-3 {
		t.Fatalf("the next payload of about its size got other memory (%d bytes)", len(second))
	}
	if p.bytes != 0 || p.take(1<<20) != nil {
		t.Fatal("memory taken from the pool is still in it")
	}
	if !p.put(second[1000:]) {
		t.Fatal("memory taken from the pool, given back again, was not taken")
	}
}

// TestRecycleCap: the pool holds at most its cap; past it memory given
// back is refused, and left to the garbage collector.
func TestRecycleCap(t *testing.T) {
	p := &recyclePool{cap: 3 << 20, idle: time.Minute}
	kept := 0
	for range 5 {
		if p.put(p.fresh(make([]byte, 1<<20))) {
			kept++
		}
		if p.bytes > p.cap {
			t.Fatalf("the pool holds %d bytes, past its cap of %d", p.bytes, p.cap)
		}
	}
	if kept != 3 || p.bytes != 3<<20 {
		t.Fatalf("%d of 5 MiB kept, %d bytes held; want 3 under a cap of 3 MiB", kept, p.bytes)
	}
	if RecycleCap != 256<<20 || recycled.cap != RecycleCap {
		t.Fatalf("the process's pool is capped at %d, documented %d", recycled.cap, RecycleCap)
	}
}

// TestRecycleIdle: memory nobody takes is let go once the pool was idle.
func TestRecycleIdle(t *testing.T) {
	p := &recyclePool{cap: 8 << 20, idle: 20 * time.Millisecond}
	if !p.put(p.fresh(make([]byte, 1<<20))) {
		t.Fatal("not taken")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		n, free := p.bytes, len(p.free)
		p.mu.Unlock()
		if n == 0 && free == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool still holds %d bytes 10 s after it went idle", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRecycleForgets: memory handed out and never given back is the
// program's: the pool does not keep it alive, and forgets it once it is
// collected (by the time it remembers twice what is live).
func TestRecycleForgets(t *testing.T) {
	p := &recyclePool{cap: 8 << 20, idle: time.Minute}
	collected := make(chan struct{}, 200)
	for range 200 {
		b := p.fresh(make([]byte, 4096))
		runtime.AddCleanup(unsafe.SliceData(b), func(ch chan struct{}) { ch <- struct{}{} }, collected)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n < 200; {
		runtime.GC()
		select {
		case <-collected:
			n++
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("%d of 200 payloads' memory collected: the pool keeps the rest alive", n)
			}
		}
	}
	var live [][]byte
	for range 300 {
		live = append(live, p.fresh(make([]byte, 4096)))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.out) != len(live) {
		t.Fatalf("the pool remembers %d payloads' memory, %d of them live; the collected ones are not forgotten", len(p.out), len(live))
	}
}
