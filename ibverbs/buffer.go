package ibverbs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	// ErrClosed: the buffer was closed by its owner (or its process is
	// gone).
	ErrClosed = errors.New("ibverbs: buffer closed")
	// ErrRange: a transfer that does not fit in the buffer.
	ErrRange = errors.New("ibverbs: transfer out of range")
	// ErrBackend: no backend can reach the buffer from here, or
	// MONARCH_RDMA_BACKEND names none that can; the error says why.
	ErrBackend = errors.New("ibverbs: no backend reaches the buffer")
)

// EnvBackend forces a backend by name: "shm" or "tcp" (any case). Read
// when a handle is bound; see the package doc, # Backends.
const EnvBackend = "MONARCH_RDMA_BACKEND"

// Handle addresses a Buffer from anywhere in the job. It is a plain value
// (msgpack and JSON encode it as is); holding one is the right to read and
// write the buffer.
type Handle struct {
	Size int    `msgpack:"size"`
	Key  uint64 `msgpack:"key"`  // the buffer's secret id
	Boot string `msgpack:"boot"` // the owner's kernel boot id: same machine, same memory
	PID  int    `msgpack:"pid"`  // the owner process
	FD   int    `msgpack:"fd"`   // its memfd, reachable as /proc/PID/fd/FD on the same machine
	// Ino is the memfd's inode: what a peer checks the file at FD is, so
	// that a buffer made later at the same fd is never taken for this one.
	Ino  uint64 `msgpack:"ino,omitempty"`
	Addr string `msgpack:"addr"` // the owner's TCP server, host:port
	// TLS is the SHA-256 of the certificate the owner's TCP server
	// presents, when it serves TLS (the job's bus does); "" for plain TCP.
	TLS string `msgpack:"tls,omitempty"`
	// With an RDMA device at the owner (the verbs backend): the buffer's
	// address there and its remote key; 0 without.
	RAddr uint64 `msgpack:"raddr,omitempty"`
	RKey  uint32 `msgpack:"rkey,omitempty"`
}

// Buffer is memory registered for one-sided access by other procs.
type Buffer struct {
	// mu guards mem against Close while a transfer served by this process
	// copies from or to it.
	mu     sync.RWMutex
	mem    []byte
	memfd  *os.File // nil for memory the program registered (Register)
	handle Handle
	once   sync.Once
	// parked holds the streams peers opened to the buffer (Connect)
	// until Accept takes them; made at first use.
	parkOnce sync.Once
	parked   *parking
}

// NewBuffer allocates size bytes of shared memory and registers them. The
// buffer is zeroed.
func NewBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: size %d", ErrRange, size)
	}
	key := newKey()
	mem, f, err := allocShared(size, key)
	if err != nil {
		return nil, err
	}
	b, err := newBuffer(mem, f, key)
	if err != nil {
		freeShared(mem, f)
		return nil, err
	}
	return b, nil
}

// Register makes memory the program already has a buffer, without a
// copy: transfers from other procs read and write mem itself. Only the
// tcp (and verbs) backends reach it from other processes: shared memory
// cannot be laid over an existing slice, so a peer on the same host also
// goes through tcp (a copy through the socket) where a NewBuffer would be
// mapped and copied from directly. Close unregisters it and leaves mem to
// the program. mem must not be appended to, and must stay alive (the
// buffer holds it).
func Register(mem []byte) (*Buffer, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("%w: register %d bytes", ErrRange, len(mem))
	}
	return newBuffer(mem, nil, newKey())
}

// newKey is a new buffer's key: random, the secret its handle holds.
func newKey() uint64 {
	var k [8]byte
	rand.Read(k[:])
	return binary.LittleEndian.Uint64(k[:])
}

// newBuffer registers mem (a memfd's mapping f, or the program's own
// memory when f is nil) with this process, under key.
func newBuffer(mem []byte, f *os.File, key uint64) (*Buffer, error) {
	p := thisProcess()
	addr, pin, err := p.serveTCP()
	if err != nil {
		return nil, err
	}
	b := &Buffer{mem: mem, memfd: f}
	b.handle = Handle{Size: len(mem), Key: key, Boot: p.boot, PID: p.pid, FD: -1, Addr: addr, TLS: pin}
	if f != nil {
		b.handle.FD = int(f.Fd())
		var st unix.Stat_t
		if err := unix.Fstat(b.handle.FD, &st); err != nil {
			return nil, fmt.Errorf("ibverbs: the buffer's memory: %w", err)
		}
		b.handle.Ino = st.Ino
	}
	p.own(b)
	return b, nil
}

// Bytes is the buffer's memory. Read and write it as any slice; do not
// append to it.
func (b *Buffer) Bytes() []byte { return b.mem }

// Handle is the buffer's address, to send to other procs.
func (b *Buffer) Handle() Handle { return b.handle }

// Close unregisters the buffer and frees its memory; later transfers from
// elsewhere fail with ErrClosed. Idempotent.
func (b *Buffer) Close() error {
	b.once.Do(func() {
		thisProcess().disown(b)
		b.parking().close()
		b.mu.Lock()
		if b.memfd != nil {
			freeShared(b.mem, b.memfd)
		}
		b.mem = nil
		b.mu.Unlock()
	})
	return nil
}

// withMem runs f on the buffer's memory, holding off Close meanwhile;
// ErrClosed once the buffer is closed.
func (b *Buffer) withMem(f func(mem []byte) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.mem == nil {
		return ErrClosed
	}
	return f(b.mem)
}

// copyAt copies b into mem from offset off on (write), or mem from off on
// into b; ErrRange if the span does not fit in mem.
func copyAt(mem []byte, off int, b []byte, write bool) error {
	if !fits(len(mem), off, len(b)) {
		return ErrRange
	}
	if write {
		copy(mem[off:], b)
	} else {
		copy(b, mem[off:])
	}
	return nil
}

// fits reports whether n bytes from offset off on lie in size bytes.
func fits(size, off, n int) bool { return off >= 0 && off <= size && n <= size-off }

// Check asks h's owner whether it serves h's buffer, through the backend
// h uses here, moving none of its bytes: nil if a buffer of at least
// h.Size bytes is there under h's key; ErrClosed if none is (no buffer of
// the owner has that key, or on this host the memory at h's fd is not
// that buffer); ErrRange if it is smaller; else why the owner could not
// be asked. A handle a transfer through which succeeded here, and none
// failed since, is not asked again: its owner served it. A reader given a
// handle by a peer checks it before it allocates h.Size bytes to read
// into: a made-up handle costs it a round trip, not the memory it claims.
func (h Handle) Check(ctx context.Context) error {
	if b := thisProcess().binding(h); b != nil && b.proven.Load() {
		return nil
	}
	return h.transfer(ctx, h.Size, nil, false)
}

// Backend says which backend transfers through h use from this process:
// "shm" or "tcp" (see the package doc, # Backends). Asking binds h as its
// first transfer would. It is "none" if no backend reaches the buffer;
// transfers then fail with ErrBackend and the reason.
func (h Handle) Backend() string {
	b, err := thisProcess().bind(h)
	if err != nil {
		return "none"
	}
	return b.name()
}

// Forget lets go of what this process keeps for h: its backend binding
// and its buffer's shm mapping, which keeps the buffer's memory alive
// even after its owner frees it. A later use of h binds and maps afresh.
// It is for a reader done with h, such as one that has read a payload
// its sender will reuse or free. It does not block. Transfers through h
// under way meanwhile complete (a mapping they use is unmapped when the
// last of them ends), and may leave h bound and mapped again. Safe to
// call concurrently with them, and more than once.
func (h Handle) Forget() {
	p := thisProcess()
	p.unbind(h)
	for _, b := range p.backends {
		if f, ok := b.(forgetter); ok {
			f.forget(h)
		}
	}
}

// ReadInto copies the buffer's first len(dst) bytes into dst.
func (h Handle) ReadInto(ctx context.Context, dst []byte) error {
	return h.transfer(ctx, 0, dst, false)
}

// WriteFrom copies src into the buffer's first len(src) bytes.
func (h Handle) WriteFrom(ctx context.Context, src []byte) error {
	return h.transfer(ctx, 0, src, true)
}

// ReadAt copies len(dst) bytes of the buffer, from byte off on, into dst:
// a span on both sides (slice dst for the local one). ErrRange if it does
// not fit.
func (h Handle) ReadAt(ctx context.Context, dst []byte, off int) error {
	return h.transfer(ctx, off, dst, false)
}

// WriteAt copies src into the buffer from byte off on.
func (h Handle) WriteAt(ctx context.Context, src []byte, off int) error {
	return h.transfer(ctx, off, src, true)
}

// transfer copies between b and the buffer's bytes from off on, through
// the backend h is bound to in this process (binding it at first use).
func (h Handle) transfer(ctx context.Context, off int, b []byte, write bool) error {
	if !fits(h.Size, off, len(b)) {
		what := "read"
		if write {
			what = "write"
		}
		return fmt.Errorf("%w: %s of %d bytes at offset %d of a buffer of %d", ErrRange, what, len(b), off, h.Size)
	}
	p := thisProcess()
	be, err := p.bind(h)
	if err != nil {
		return err
	}
	if write {
		err = be.write(ctx, h, off, b)
	} else {
		err = be.read(ctx, h, off, b)
	}
	return p.settle(h, be, err)
}

func isClosed(err error) bool { return errors.Is(err, ErrClosed) }
