package ibverbs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

var (
	// ErrClosed: the buffer was closed by its owner (or its process is
	// gone).
	ErrClosed = errors.New("ibverbs: buffer closed")
	// ErrRange: a transfer larger than the buffer.
	ErrRange = errors.New("ibverbs: transfer out of range")
	// ErrBackend: no backend can reach the buffer from here.
	ErrBackend = errors.New("ibverbs: no backend reaches the buffer")
)

// EnvBackend forces a backend: "shm" or "tcp".
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
	Addr string `msgpack:"addr"` // the owner's TCP server, host:port
}

// Buffer is memory registered for one-sided access by other procs.
type Buffer struct {
	// mu guards mem against Close while a transfer served by this process
	// copies from or to it.
	mu     sync.RWMutex
	mem    []byte
	memfd  *os.File
	handle Handle
	once   sync.Once
}

// NewBuffer allocates size bytes of shared memory and registers them. The
// buffer is zeroed.
func NewBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: size %d", ErrRange, size)
	}
	mem, f, err := allocShared(size)
	if err != nil {
		return nil, err
	}
	var k [8]byte
	rand.Read(k[:])
	b := &Buffer{mem: mem, memfd: f}
	b.handle = Handle{Size: size, Key: binary.LittleEndian.Uint64(k[:]), Boot: bootID(), PID: os.Getpid(), FD: int(f.Fd())}
	addr, err := serve(b)
	if err != nil {
		freeShared(mem, f)
		return nil, err
	}
	b.handle.Addr = addr
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
		unserve(b)
		b.mu.Lock()
		freeShared(b.mem, b.memfd)
		b.mem = nil
		b.mu.Unlock()
	})
	return nil
}

// Backend says which backend a transfer with h uses from this process.
func (h Handle) Backend() string {
	switch strings.ToLower(os.Getenv(EnvBackend)) {
	case "tcp":
		return "tcp"
	case "shm":
		return "shm"
	}
	if h.Boot != "" && h.Boot == bootID() && canMap(h) {
		return "shm"
	}
	return "tcp"
}

// ReadInto copies the buffer's first len(dst) bytes into dst.
func (h Handle) ReadInto(ctx context.Context, dst []byte) error {
	if len(dst) > h.Size {
		return fmt.Errorf("%w: read of %d bytes from a buffer of %d", ErrRange, len(dst), h.Size)
	}
	if h.Backend() == "shm" {
		return shmCopy(h, dst, false)
	}
	return tcpTransfer(ctx, h, dst, false)
}

// WriteFrom copies src into the buffer's first len(src) bytes.
func (h Handle) WriteFrom(ctx context.Context, src []byte) error {
	if len(src) > h.Size {
		return fmt.Errorf("%w: write of %d bytes into a buffer of %d", ErrRange, len(src), h.Size)
	}
	if h.Backend() == "shm" {
		return shmCopy(h, src, true)
	}
	return tcpTransfer(ctx, h, src, true)
}

var bootOnce = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

func bootID() string { return bootOnce() }
