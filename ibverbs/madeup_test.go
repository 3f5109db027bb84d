package ibverbs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/testenv"
)

// Handles a peer made up, or whose owner stalls: a transfer through one
// fails, within seconds, reads nothing it has no key for, and leaves
// nothing behind.

// TestStalledOwner: an owner that accepts and never answers fails a read
// within the client's bounds (seconds), not at the transfer's 10 minutes,
// with an error naming it: over plain TCP, where the request goes and
// its answer never comes, and over TLS, where the handshake never ends.
func TestStalledOwner(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "TLS"}[withTLS]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := ibverbs.Handle{Size: 1 << 20, Key: 7, FD: -1, Addr: testenv.StalledServer(t)}
			if withTLS {
				h.TLS = strings.Repeat("00", 32)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- h.ReadInto(ctx, make([]byte, h.Size)) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), h.Addr) {
					t.Fatalf("a read from an owner that never answers: %v; want an error naming %s", err, h.Addr)
				}
				t.Log(err)
			case <-time.After(40 * time.Second):
				t.Fatal("a read from an owner that never answers still waits after 40s")
			}
		})
	}
}

// TestMadeUpHandles: a handle whose key is not its buffer's, made from
// what anyone on the host sees of a buffer (its owner's pid, its fd, its
// size, its address), reads nothing through shm or tcp and fails its
// Check with ErrClosed, as does one claiming a larger buffer; the real
// one checks. Thousands of transfers through handles that fail leave no
// binding or mapping behind.
func TestMadeUpHandles(t *testing.T) {
	ctx := context.Background()
	o := startOwner(t)
	madeUp := o.h
	madeUp.Key ^= 1
	larger := o.h
	larger.Size *= 2
	for _, backend := range []string{"shm", "tcp"} {
		t.Run(backend, func(t *testing.T) {
			t.Setenv(ibverbs.EnvBackend, backend)
			o.h.Forget() // bound afresh, to this backend
			got := make([]byte, o.h.Size)
			if err := madeUp.ReadInto(ctx, got); !errors.Is(err, ibverbs.ErrClosed) {
				t.Errorf("a read through a made-up key: %v, want ErrClosed", err)
			}
			for i, b := range got {
				if b != 0 {
					t.Fatalf("a read through a made-up key delivered the buffer's bytes (byte %d is %d)", i, b)
				}
			}
			if err := madeUp.Check(ctx); !errors.Is(err, ibverbs.ErrClosed) {
				t.Errorf("Check of a made-up key: %v, want ErrClosed", err)
			}
			if err := larger.Check(ctx); !errors.Is(err, ibverbs.ErrClosed) && !errors.Is(err, ibverbs.ErrRange) {
				t.Errorf("Check of a handle claiming %d bytes of a buffer of %d: %v", larger.Size, o.h.Size, err)
			}
			if err := o.h.Check(ctx); err != nil {
				t.Errorf("Check of the real handle: %v", err)
			}
		})
	}

	bindings := ibverbs.Bindings()
	mappings, _ := ibverbs.PeerMappings()
	t.Setenv(ibverbs.EnvBackend, "")
	for i := range 5000 {
		shm, tcp := madeUp, ibverbs.Handle{Size: 1 << 30, Key: uint64(i), FD: -1, Addr: "127.0.0.1:1"}
		shm.Key = uint64(i) << 1
		for _, h := range []ibverbs.Handle{shm, tcp} {
			if err := h.ReadAt(ctx, make([]byte, 8), 0); err == nil {
				t.Fatalf("a read through made-up handle %d succeeded", i)
			}
		}
	}
	if n := ibverbs.Bindings(); n > bindings {
		t.Errorf("10,000 made-up handles tried: %d bindings kept, %d before", n, bindings)
	}
	if n, _ := ibverbs.PeerMappings(); n > mappings {
		t.Errorf("5,000 made-up shm handles tried: %d mappings kept, %d before", n, mappings)
	}
}
