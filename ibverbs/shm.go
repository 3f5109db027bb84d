package ibverbs

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Same-host transfers: the owner's buffer is a memfd mapping; a peer on
// the same machine opens it through /proc/PID/fd/FD once, maps it, and
// keeps the mapping for later transfers.

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

// peer mappings, by owner pid and key. A mapping keeps its pages alive
// after the owner closes the buffer, so every use first checks that the
// owner's fd is still that memfd (same inode).
var peers = struct {
	sync.Mutex
	m map[peerKey]peerMapping
}{m: map[peerKey]peerMapping{}}

type peerKey struct {
	pid int
	key uint64
}

type peerMapping struct {
	mem []byte
	ino uint64
}

func ownerInode(h Handle) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", h.PID, h.FD), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// peerMap maps h's buffer here, or returns the cached mapping.
func peerMap(h Handle) ([]byte, error) {
	ino, err := ownerInode(h)
	k := peerKey{h.PID, h.Key}
	peers.Lock()
	defer peers.Unlock()
	if pm, ok := peers.m[k]; ok {
		if err == nil && pm.ino == ino {
			return pm.mem, nil
		}
		unix.Munmap(pm.mem)
		delete(peers.m, k)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the owner's memory is gone: %v", ErrClosed, err)
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", h.PID, h.FD), os.O_RDWR, 0)
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
	peers.m[k] = peerMapping{mem: m, ino: ino}
	return m, nil
}

// canMap reports whether h's memory can be mapped from here.
func canMap(h Handle) bool {
	if h.PID == os.Getpid() {
		return true
	}
	_, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", h.PID, h.FD))
	return err == nil
}

func shmCopy(h Handle, b []byte, write bool) error {
	if h.PID == os.Getpid() {
		// This process's own buffer: no mapping to make.
		buf := lookup(h.Key)
		if buf == nil {
			return ErrClosed
		}
		buf.mu.RLock()
		defer buf.mu.RUnlock()
		if buf.mem == nil {
			return ErrClosed
		}
		if write {
			copy(buf.mem, b)
		} else {
			copy(b, buf.mem)
		}
		return nil
	}
	m, err := peerMap(h)
	if err != nil {
		return err
	}
	if write {
		copy(m, b)
	} else {
		copy(b, m)
	}
	return nil
}
