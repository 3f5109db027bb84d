package ibverbs

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Same-host transfers, the shm backend: the owner's buffer is a memfd
// mapping; a peer on the same machine opens it through /proc/PID/fd/FD
// once, maps it, and keeps the mapping for later transfers, within
// bounds (maxPeerMappings, maxPeerBytes). The memfd's name carries a
// digest of the buffer's key (memfdName), and a peer opens and maps the
// file at FD only if it has the name of the key its handle holds: as over
// tcp, holding the key is the right to the buffer, and a handle made up
// from a pid, an fd and a size (all that /proc shows) reads nothing.

// memfdName is the name of the memfd of the buffer whose key is key: a
// digest of it, which shows the key to nobody (the names of a process's
// memfds show in its /proc/PID/maps).
func memfdName(key uint64) string {
	var k [8]byte
	binary.LittleEndian.PutUint64(k[:], key)
	sum := sha256.Sum256(append([]byte("monarch-rdma key "), k[:]...))
	return "monarch-rdma-" + hex.EncodeToString(sum[:16])
}

// memfdLink is what /proc/PID/fd/FD reads as for the memfd of key.
func memfdLink(key uint64) string { return "/memfd:" + memfdName(key) + " (deleted)" }

// allocShared makes size bytes of shared memory for the buffer of key.
func allocShared(size int, key uint64) ([]byte, *os.File, error) {
	fd, err := unix.MemfdCreate(memfdName(key), unix.MFD_CLOEXEC)
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
		return &shmBackend{p: p, peers: map[peerKey]*peerMapping{}, maxMappings: maxPeerMappings, maxBytes: maxPeerBytes}
	})
}

// The bounds of the mappings a process keeps of other processes' buffers.
// A mapping keeps the owner's pages alive after the owner closed the
// buffer, and a reader learns of the close only at its next use, so what
// is kept must be bounded; past either bound the least recently used
// mapping goes first. Only the cache is bounded: a transfer still using a
// mapping that left it keeps it mapped until the transfer ends.
const (
	// maxPeerMappings, 256: a reader goes back to far fewer buffers than
	// that at a time (the weights it pulls, the pooled buffers its peers
	// send payloads through), so those stay mapped; a reader of many
	// buffers, each read once, keeps at most 256 (each one of the
	// process's memory areas, of which Linux allows 65530 by default),
	// and a buffer read again after it left costs an open, an fstat and
	// an mmap again.
	maxPeerMappings = 256
	// maxPeerBytes, 4 GiB: at worst that much of closed buffers' memory is
	// held by this process, little next to a training host's memory,
	// while a reader that goes back to a few large buffers (weight shards
	// of a GiB) still finds them mapped. The most recently used mapping
	// is kept even when it alone is larger.
	maxPeerBytes = 4 << 30
)

// shmBackend reaches buffers of this machine: its own process's through
// the owned buffers, other processes' through mappings of their memfds.
type shmBackend struct {
	p *process

	// mu guards the mappings of other processes' buffers: peers, by owner
	// pid and key, and lru, the same mappings with the most recently used
	// first. A mapping keeps its pages alive after the owner closes the
	// buffer, so every use first checks that the owner's fd is still that
	// memfd (same inode).
	mu    sync.Mutex
	peers map[peerKey]*peerMapping
	lru   list.List // of *peerMapping
	bytes int64     // mapped by the entries of peers

	// The bounds of peers: maxPeerMappings and maxPeerBytes, lowered by
	// tests (under mu).
	maxMappings int
	maxBytes    int64
}

type peerKey struct {
	pid int
	key uint64
}

// peerMapping is one mapping of another process's buffer. elem and users
// are guarded by shmBackend.mu; the rest is set before it is shared.
type peerMapping struct {
	key  peerKey
	mem  []byte
	ino  uint64        // of the memfd mapped
	elem *list.Element // in lru; nil once out of the cache
	// users counts the transfers copying from or to mem now: a mapping
	// that left the cache is unmapped by the last of them, never under
	// one (that would fault it).
	users int
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

// onMem runs f on the memory of h's buffer: this process's own (no
// mapping to make), or the owner's, mapped here, while f runs.
func (s *shmBackend) onMem(h Handle, f func(mem []byte) error) error {
	if h.PID == s.p.pid {
		buf := s.p.lookup(h.Key)
		if buf == nil {
			return ErrClosed
		}
		return buf.withMem(f)
	}
	m, err := s.peerMap(h)
	if err != nil {
		return err
	}
	defer s.release(m)
	return f(m.mem)
}

// copy is a memory copy and does not block, so it has no use for ctx.
func (s *shmBackend) copy(h Handle, off int, b []byte, write bool) error {
	return s.onMem(h, func(mem []byte) error { return copyAt(mem, off, b, write) })
}

// atomic is a processor atomic on the owner's memory, shared with it.
func (s *shmBackend) atomic(_ context.Context, h Handle, off int, op atomicOp, a, b uint64) (v uint64, err error) {
	err = s.onMem(h, func(mem []byte) error {
		v, err = atomicAt(mem, off, op, a, b)
		return err
	})
	return v, err
}

// writeAdd is WriteAdd through shared memory: the copy and the add on
// one mapping, found (and its owner checked) once.
func (s *shmBackend) writeAdd(h Handle, off int, src []byte, word int, delta uint64) error {
	return s.onMem(h, func(mem []byte) error {
		if err := copyAt(mem, off, src, true); err != nil {
			return err
		}
		_, err := atomicAt(mem, word, opFetchAdd, delta, 0)
		return err
	})
}

// fdPath is where the owner's memfd shows on this machine.
func fdPath(h Handle) string { return "/proc/" + strconv.Itoa(h.PID) + "/fd/" + strconv.Itoa(h.FD) }

func ownerInode(h Handle) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fdPath(h), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// peerMap is a mapping of h's buffer, the cached one or a new one, with a
// use held: the caller releases it when done with its memory.
func (s *shmBackend) peerMap(h Handle) (*peerMapping, error) {
	ino, statErr := ownerInode(h)
	k := peerKey{h.PID, h.Key}
	s.mu.Lock()
	if m := s.peers[k]; m != nil {
		if statErr == nil && m.ino == ino {
			m.users++
			s.lru.MoveToFront(m.elem)
			s.mu.Unlock()
			return m, nil
		}
		s.drop(m) // the owner's fd is gone, or another file now
	}
	s.mu.Unlock()
	if statErr != nil {
		return nil, fmt.Errorf("%w: the owner's memory is gone: %v", ErrClosed, statErr)
	}
	// Mapped without the lock: MAP_POPULATE of a large buffer takes long,
	// and transfers through other mappings need not wait for it.
	m, err := mapPeer(h)
	if err != nil {
		return nil, err
	}
	m.key, m.users = k, 1
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.peers[k]; old != nil {
		if old.ino == m.ino {
			// Another transfer mapped the same memory meanwhile: one
			// mapping is enough.
			unix.Munmap(m.mem)
			old.users++
			s.lru.MoveToFront(old.elem)
			return old, nil
		}
		s.drop(old)
	}
	s.peers[k] = m
	m.elem = s.lru.PushFront(m)
	s.bytes += int64(len(m.mem))
	for s.lru.Len() > 1 && (s.lru.Len() > s.maxMappings || s.bytes > s.maxBytes) {
		s.drop(s.lru.Back().Value.(*peerMapping))
	}
	return m, nil
}

// mapPeer maps the memfd behind h's owner's fd, if it is the buffer of
// h's key, of h's size. Nothing else at that fd is opened (a tty, a
// device, another buffer).
func mapPeer(h Handle) (*peerMapping, error) {
	notThis := fmt.Errorf("%w: the owner's fd %d is not this buffer (another key, or no buffer)", ErrClosed, h.FD)
	if l, err := os.Readlink(fdPath(h)); err != nil || l != memfdLink(h.Key) {
		return nil, notThis
	}
	f, err := os.OpenFile(fdPath(h), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: open the owner's memory: %v", ErrClosed, err)
	}
	defer f.Close()
	// The name, size and inode of the file opened, not of the one looked
	// at before: the owner may have put another file at that fd in
	// between.
	fd := int(f.Fd())
	if l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || l != memfdLink(h.Key) {
		return nil, notThis
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size != int64(h.Size) || h.Ino != 0 && st.Ino != h.Ino {
		return nil, fmt.Errorf("%w: the owner's memory is not this buffer", ErrClosed)
	}
	mem, err := unix.Mmap(fd, 0, h.Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ibverbs: map the owner's memory: %w", err)
	}
	return &peerMapping{mem: mem, ino: st.Ino}, nil
}

// release gives back a use that peerMap took.
func (s *shmBackend) release(m *peerMapping) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.users--
	if m.users == 0 && m.elem == nil {
		unix.Munmap(m.mem)
	}
}

// drop takes m out of the cache, and unmaps it if no transfer uses it
// (else the last one does). Called with s.mu held.
func (s *shmBackend) drop(m *peerMapping) {
	delete(s.peers, m.key)
	s.lru.Remove(m.elem)
	m.elem = nil
	s.bytes -= int64(len(m.mem))
	if m.users == 0 {
		unix.Munmap(m.mem)
	}
}

// forget drops the mapping of h's buffer, if this process keeps one.
func (s *shmBackend) forget(h Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.peers[peerKey{h.PID, h.Key}]; m != nil {
		s.drop(m)
	}
}
