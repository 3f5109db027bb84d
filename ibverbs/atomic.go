package ibverbs

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Atomics on a buffer's 8-byte words, as RDMA's: fetch-and-add and
// compare-and-swap, each returning the word as it was. They are atomic
// with respect to each other whichever process and backend issues them
// (shm and tcp both use the processor's atomic instructions on the same
// memory), not with plain reads and writes of the word. One that changes
// the word wakes the owner's waiters on it (Buffer.Wait).

// atomicOp is an atomic operation on one word.
type atomicOp byte

const (
	opFetchAdd atomicOp = 'a' // word += a
	opCAS      atomicOp = 'c' // if word == a { word = b }
)

// FetchAdd adds delta to the 8-byte word at byte off (a multiple of 8)
// and returns its value before.
func (h Handle) FetchAdd(ctx context.Context, off int, delta uint64) (uint64, error) {
	return h.atomic(ctx, off, opFetchAdd, delta, 0)
}

// CompareAndSwap sets the 8-byte word at byte off to new if it is old,
// and returns its value before: old if it was swapped.
func (h Handle) CompareAndSwap(ctx context.Context, off int, old, new uint64) (uint64, error) {
	return h.atomic(ctx, off, opCAS, old, new)
}

func (h Handle) atomic(ctx context.Context, off int, op atomicOp, a, b uint64) (uint64, error) {
	if off%8 != 0 || !fits(h.Size, off, 8) {
		return 0, fmt.Errorf("%w: an atomic at offset %d of a buffer of %d bytes (a whole 8-byte word is needed, at a multiple of 8)", ErrRange, off, h.Size)
	}
	p := thisProcess()
	be, err := p.bind(h)
	if err != nil {
		return 0, err
	}
	v, err := be.atomic(ctx, h, off, op, a, b)
	return v, p.settle(h, be, err)
}

// atomicAt runs op on the word at mem[off:off+8]; ErrRange where it does
// not fit or is not aligned.
func atomicAt(mem []byte, off int, op atomicOp, a, b uint64) (uint64, error) {
	if off < 0 || off%8 != 0 || !fits(len(mem), off, 8) {
		return 0, ErrRange
	}
	p := unsafe.Pointer(&mem[off])
	if uintptr(p)%8 != 0 {
		return 0, fmt.Errorf("%w: the word at offset %d is not 8-byte aligned in memory", ErrRange, off)
	}
	w := (*uint64)(p)
	switch op {
	case opFetchAdd:
		v := atomic.AddUint64(w, a) - a
		if a != 0 {
			futexWake(p) // see Buffer.Wait
		}
		return v, nil
	case opCAS:
		for {
			cur := atomic.LoadUint64(w)
			if cur != a {
				return cur, nil
			}
			if atomic.CompareAndSwapUint64(w, a, b) {
				if a != b {
					futexWake(p)
				}
				return a, nil
			}
		}
	}
	return 0, fmt.Errorf("ibverbs: unknown atomic op %q", op)
}

// atomicAt is atomicAt on the buffer's memory, holding off Close.
func (b *Buffer) atomicAt(off int, op atomicOp, x, y uint64) (uint64, error) {
	var v uint64
	err := b.withMem(func(mem []byte) (err error) {
		v, err = atomicAt(mem, off, op, x, y)
		return err
	})
	return v, err
}
