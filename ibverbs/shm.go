package ibverbs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Same-host transfers, the shm backend: the owner's buffer is a memfd
// mapping; a peer on the same machine opens it through /proc/PID/fd/FD
// once, maps it, and keeps the mapping for later transfers.

func allocShared(size int) ([]byte, *os.File, error) {
	fd, err := unix.MemfdCreate("monarch-rdma", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("ibverbs: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "monarch-rdma")
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("ibverbs: size the buffer: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("ibverbs: map the buffer: %w", err)
	}
	return mem, f, nil
}

func freeShared(mem []byte, f *os.File) {
	unix.Munmap(mem)
	f.Close()
}

func init() {
	register("shm", func(p *process) backend {
		return &shmBackend{p: p, peers: map[peerKey]peerMapping{}}
	})
}

// shmBackend reaches buffers of this machine: its own process's through
// the owned buffers, other processes' through mappings of their memfds.
type shmBackend struct {
	p *process

	// mu guards peers, the mappings of other processes' buffers by owner
	// pid and key. A mapping keeps its pages alive after the owner closes
	// the buffer, so every use first checks that the owner's fd is still
	// that memfd (same inode).
	mu    sync.Mutex
	peers map[peerKey]peerMapping
}

type peerKey struct {
	pid int
	key uint64
}

type peerMapping struct {
	mem []byte
	ino uint64
}

func (*shmBackend) name() string { return "shm" }

func (s *shmBackend) usable(h Handle) error {
	switch {
	case s.p.boot == "":
		return errors.New("this machine's boot id is unknown")
	case h.Boot == "":
		return errors.New("the handle does not say its owner's host")
	case h.Boot != s.p.boot:
		return errors.New("owner on another host")
	case h.PID == s.p.pid:
		return nil
	case h.FD < 0:
		return errors.New("memory the program registered (Register) is not shared memory: a peer on the host goes through tcp")
	}
	if _, err := os.Stat(fdPath(h)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: the owner's memory is gone", ErrClosed)
		}
		return fmt.Errorf("the owner's memory cannot be opened from here: %v", err)
	}
	return nil
}

func (s *shmBackend) read(_ context.Context, h Handle, off int, dst []byte) error {
	return s.copy(h, off, dst, false)
}

func (s *shmBackend) write(_ context.Context, h Handle, off int, src []byte) error {
	return s.copy(h, off, src, true)
}

// copy is a memory copy and does not block, so it has no use for ctx.
func (s *shmBackend) copy(h Handle, off int, b []byte, write bool) error {
	if h.PID == s.p.pid {
		// This process's own buffer: no mapping to make.
		buf := s.p.lookup(h.Key)
		if buf == nil {
			return ErrClosed
		}
		return buf.copyAt(off, b, write)
	}
	m, err := s.peerMap(h)
	if err != nil {
		return err
	}
	return copyAt(m, off, b, write)
}

// atomic is a processor atomic on the owner's memory, shared with it.
func (s *shmBackend) atomic(_ context.Context, h Handle, off int, op atomicOp, a, b uint64) (uint64, error) {
	if h.PID == s.p.pid {
		buf := s.p.lookup(h.Key)
		if buf == nil {
			return 0, ErrClosed
		}
		return buf.atomicAt(off, op, a, b)
	}
	m, err := s.peerMap(h)
	if err != nil {
		return 0, err
	}
	return atomicAt(m, off, op, a, b)
}

// fdPath is where the owner's memfd shows on this machine.
func fdPath(h Handle) string { return fmt.Sprintf("/proc/%d/fd/%d", h.PID, h.FD) }

func ownerInode(h Handle) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fdPath(h), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// peerMap maps h's buffer here, or returns the cached mapping.
func (s *shmBackend) peerMap(h Handle) ([]byte, error) {
	ino, err := ownerInode(h)
	k := peerKey{h.PID, h.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pm, ok := s.peers[k]; ok {
		if err == nil && pm.ino == ino {
			return pm.mem, nil
		}
		unix.Munmap(pm.mem)
		delete(s.peers, k)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the owner's memory is gone: %v", ErrClosed, err)
	}
	f, err := os.OpenFile(fdPath(h), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: open the owner's memory: %v", ErrClosed, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(h.Size) {
		return nil, fmt.Errorf("%w: the owner's memory is not this buffer", ErrClosed)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, h.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ibverbs: map the owner's memory: %w", err)
	}
	s.peers[k] = peerMapping{mem: m, ino: ino}
	return m, nil
}
