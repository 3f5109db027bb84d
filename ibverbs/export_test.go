package ibverbs

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// ReadAt and WriteAt are the methods, as functions, for the tests written
// before the methods were exported.
func ReadAt(ctx context.Context, h Handle, off int, dst []byte) error { return h.ReadAt(ctx, dst, off) }

func WriteAt(ctx context.Context, h Handle, off int, src []byte) error {
	return h.WriteAt(ctx, src, off)
}

// shm is this process's shm backend.
func shm() *shmBackend {
	for _, b := range thisProcess().backends {
		if s, ok := b.(*shmBackend); ok {
			return s
		}
	}
	panic("no shm backend")
}

// SetPeerBounds sets the bounds of the shm mappings this process keeps,
// for a test: the mappings past them go at the next new one. restore
// sets the bounds back.
func SetPeerBounds(mappings int, bytes int64) (restore func()) {
	s := shm()
	s.mu.Lock()
	defer s.mu.Unlock()
	was, wasBytes := s.maxMappings, s.maxBytes
	s.maxMappings, s.maxBytes = mappings, bytes
	return func() {
		s.mu.Lock()
		s.maxMappings, s.maxBytes = was, wasBytes
		s.mu.Unlock()
	}
}

// PeerMappings is how many mappings of other processes' buffers the shm
// backend keeps, and their bytes.
func PeerMappings() (n int, bytes int64) {
	s := shm()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.peers) != s.lru.Len() {
		panic(fmt.Sprintf("shm: %d mappings by key, %d in lru order", len(s.peers), s.lru.Len()))
	}
	return len(s.peers), s.bytes
}

// Mapped says whether the shm backend keeps a mapping of h's buffer.
func Mapped(h Handle) bool {
	s := shm()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peers[peerKey{h.PID, h.Key}] != nil
}

// Bindings is how many handles this process keeps a backend for.
func Bindings() int {
	p := thisProcess()
	p.boundMu.RLock()
	defer p.boundMu.RUnlock()
	return len(p.bound)
}

// DropIdleConns closes the idle connections this process's tcp backend
// keeps: the next transfer dials afresh.
func DropIdleConns() {
	for _, b := range thisProcess().backends {
		if t, ok := b.(*tcpBackend); ok {
			t.mu.Lock()
			keys := slices.Collect(maps.Keys(t.idle))
			t.mu.Unlock()
			for _, k := range keys {
				t.dropIdle(k)
			}
		}
	}
}
