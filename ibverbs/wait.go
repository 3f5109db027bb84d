package ibverbs

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Waiting on a word. An owner that waits for a peer's atomic on one of
// its words (a counter its peers add to) blocks on the word itself, a
// futex, rather than polling it: Wait sleeps in the kernel until an
// atomic wakes the word, and every atomic that changes a word through
// the shm or tcp backend wakes its waiters (shm: the peer, on its mapping
// of the owner's memory; tcp: the owner's buffer server, which applies
// it). The futex is the shared kind, not FUTEX_PRIVATE: the kernel keys
// it by the memory's file and offset, so a peer's mapping and the
// owner's are the same futex. The verbs backend's atomics are the
// device's and wake nobody: a waiter there returns at its timeout.

// Wait blocks until the 8-byte word at byte off (a multiple of 8) may no
// longer be old: an atomic on it woke the word, or the word was already
// not old (by its low 32 bits, which a counter changes at every step),
// or d passed. It may also return early for no reason, so callers check
// the word again and wait again. ErrRange for a word outside the buffer,
// ErrClosed after Close. Close does not wait for it: a wait on a buffer
// closed meanwhile ends at once or at d.
func (b *Buffer) Wait(off int, old uint64, d time.Duration) error {
	b.mu.RLock()
	mem := b.mem
	b.mu.RUnlock()
	if mem == nil {
		return ErrClosed
	}
	if off < 0 || off%8 != 0 || !fits(len(mem), off, 8) {
		return fmt.Errorf("%w: a wait at offset %d of a buffer of %d bytes", ErrRange, off, len(mem))
	}
	if d <= 0 {
		return nil
	}
	futexWait(unsafe.Pointer(&mem[off]), uint32(old), d)
	return nil
}

// The futex operations of linux/futex.h (golang.org/x/sys/unix does not
// name them): the shared ones, without FUTEX_PRIVATE_FLAG.
const (
	futexOpWait = 0 // FUTEX_WAIT
	futexOpWake = 1 // FUTEX_WAKE
)

// futexWait sleeps while the 32-bit word at addr is val, for d at most.
// EAGAIN (it was not val), EINTR and ETIMEDOUT all mean: look again.
func futexWait(addr unsafe.Pointer, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Syscall6(unix.SYS_FUTEX, uintptr(addr), futexOpWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every waiter on the word at addr, in any process.
func futexWake(addr unsafe.Pointer) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(addr), futexOpWake, uintptr(1<<31-1), 0, 0, 0)
}
