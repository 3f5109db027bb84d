package delivery

import (
	"sync"
	"time"
	"unsafe"
	"weak"
)

// Memory a program gives back. A payload read out of band lands in memory
// of this process that, once decoded, is the program's: a large []byte or
// numeric slice of the message refers to it in place, so the runtime never
// knows when it is free. Fresh memory is what makes a large read slow on
// a virtual machine (every page faults in on first write, 90-800 ms for
// 64 MiB here, and the Go heap returns what it freed to the kernel as it
// grows), so a program that is done with a message may give its memory
// back (Recycle), and the next payload of a size it fits is read into it:
// memory already faulted in, as a stream's receive buffer is.
//
// Only memory a payload was read into is taken back, once: the layer
// remembers, by weak pointer, the memory it handed out and not yet got
// back (so a slice never given back is collected as any other). The pool
// holds at most RecycleCap bytes, and lets all of it go (to the garbage
// collector, which returns it to the kernel) once RecycleIdle passes with
// none given back or taken.
const (
	// RecycleCap bounds the bytes the pool holds.
	RecycleCap = 256 << 20
	// RecycleIdle is how long the pool keeps memory nobody takes.
	RecycleIdle = 30 * time.Second
)

// recycled is the process's pool of memory given back.
var recycled = &recyclePool{cap: RecycleCap, idle: RecycleIdle}

type recyclePool struct {
	mu     sync.Mutex
	free   [][]byte // whole memory of payloads, given back
	bytes  int
	cap    int           // RecycleCap
	out    []handedOut   // memory handed out, not given back
	pruned int           // len(out) after the last pruning
	idle   time.Duration // RecycleIdle
	timer  *time.Timer   // drops the pool once idle
}

// handedOut is memory a payload was read into: n bytes at base.
type handedOut struct {
	base uintptr
	n    int
	mem  weak.Pointer[byte]
}

// Recycle gives back the memory of the payload p is part of (a slice of
// what a decoded message refers to in place) to read a later payload
// into; it reports whether it was taken: not if p is no part of a payload
// read out of band, or one given back already, or if the pool would hold
// more than RecycleCap. All of that payload's memory is given back: no
// value decoded from that message may be used afterwards.
func Recycle(p []byte) bool { return recycled.put(p) }

// RecycledBytes is the bytes the pool holds.
func RecycledBytes() int {
	recycled.mu.Lock()
	defer recycled.mu.Unlock()
	return recycled.bytes
}

func (p *recyclePool) put(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.out {
		if at < h.base || at >= h.base+uintptr(h.n) {
			continue
		}
		base := h.mem.Value()
		if base == nil || uintptr(unsafe.Pointer(base)) != h.base {
			continue // collected; the address is another's now
		}
		if p.bytes+h.n > p.cap {
			return false
		}
		p.out[i] = p.out[len(p.out)-1]
		p.out = p.out[:len(p.out)-1]
		p.free = append(p.free, unsafe.Slice(base, h.n))
		p.bytes += h.n
		p.touch()
		return true
	}
	return false
}

// take returns size bytes of memory given back, from the smallest
// payload's memory that holds them and is at most twice their size (so
// that a small payload does not pin a large one's memory); nil if none.
func (p *recyclePool) take(size int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i, f := range p.free {
		if n := len(f); n >= size && n <= 2*size && (best < 0 || n < len(p.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := p.free[best]
	p.free[best] = p.free[len(p.free)-1]
	p.free[len(p.free)-1] = nil
	p.free = p.free[:len(p.free)-1]
	p.bytes -= len(b)
	p.touch()
	p.handOut(b)
	return b[:size]
}

// handOut remembers b, memory a payload is read into, so that it can be
// given back. Hold mu.
func (p *recyclePool) handOut(b []byte) {
	if len(p.out) >= 2*p.pruned+64 {
		p.out = prune(p.out)
		p.pruned = len(p.out)
	}
	base := unsafe.SliceData(b)
	p.out = append(p.out, handedOut{uintptr(unsafe.Pointer(base)), len(b), weak.Make(base)})
}

// prune drops what was collected.
func prune(out []handedOut) []handedOut {
	kept := out[:0]
	for _, h := range out {
		if h.mem.Value() != nil {
			kept = append(kept, h)
		}
	}
	clear(out[len(kept):])
	return kept
}

// touch (re)starts the idle timer. Hold mu.
func (p *recyclePool) touch() {
	if p.timer == nil {
		p.timer = time.AfterFunc(p.idle, p.drop)
		return
	}
	p.timer.Reset(p.idle)
}

// drop lets every payload's memory go.
func (p *recyclePool) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.free)
	p.free, p.bytes = nil, 0
}

// fresh is new memory for a payload of size bytes, remembered.
func (p *recyclePool) fresh(b []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handOut(b)
	return b
}
