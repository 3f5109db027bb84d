package ibverbs

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// backend is one way of moving a transfer's bytes between this process
// and a buffer, wherever the buffer's owner runs. Each backend is one
// file that adds itself to the binary with register in an init function,
// so a backend behind a build tag is that one file.
//
// A backend value belongs to one process (it is made by newProcess and
// may keep per-process caches) and is safe for concurrent use.
type backend interface {
	// name is the backend's name as MONARCH_RDMA_BACKEND and
	// Handle.Backend spell it.
	name() string
	// usable is nil if the backend can reach h's buffer from this
	// process, else why not, in one line ("owner on another host", "no
	// RDMA device"). It is asked when a handle is bound (see bind), moves
	// no data and does not block.
	usable(h Handle) error
	// read copies len(dst) bytes of h's buffer, from offset off on, into
	// dst. The caller has checked off and len(dst) against h.Size; the
	// backend checks them again against the memory it finds, which a
	// handle can misdescribe. A buffer that is gone gives an error
	// wrapping ErrClosed.
	read(ctx context.Context, h Handle, off int, dst []byte) error
	// write copies src into h's buffer from offset off on, as read does
	// the other way.
	write(ctx context.Context, h Handle, off int, src []byte) error
	// atomic runs op on the 8-byte word of h's buffer at off (checked by
	// the caller) and returns the word as it was.
	atomic(ctx context.Context, h Handle, off int, op atomicOp, a, b uint64) (uint64, error)
}

// forgetter is a backend that keeps something for each handle it moved
// bytes for (shm: the mapping of the handle's buffer); forget lets it go
// for h, at once or, where a transfer still uses it, when that ends.
type forgetter interface {
	forget(h Handle)
}

// preference is the order in which backends are tried for a handle that
// no MONARCH_RDMA_BACKEND forces: the fastest first. verbs is built only
// with -tags verbs; a name that no file registered is skipped.
var preference = []string{"verbs", "shm", "tcp"}

// compiled holds, by name, the constructor of each backend in this
// binary. Init functions fill it (register) before main runs, and it is
// only read afterwards, like a codec registry: it describes the binary,
// not the process, so it is not part of process.
var compiled = map[string]func(*process) backend{}

// register adds a backend to the binary; its name must have a place in
// preference.
func register(name string, newBackend func(*process) backend) {
	if !slices.Contains(preference, name) {
		panic("ibverbs: backend " + name + " has no place in the preference order")
	}
	compiled[name] = newBackend
}

// choose picks the backend for h among bs, which are in preference
// order: the one named by forced if forced is not empty (whatever its
// case), else the first that is usable. The error wraps ErrBackend and
// says why: an unknown forced name with the valid ones, the forced
// backend's reason, or every backend's reason.
func choose(forced string, h Handle, bs []backend) (backend, error) {
	if forced != "" {
		want := strings.ToLower(forced)
		for _, b := range bs {
			if b.name() != want {
				continue
			}
			if err := b.usable(h); err != nil {
				return nil, fmt.Errorf("%w: %s=%s: %w", ErrBackend, EnvBackend, forced, err)
			}
			return b, nil
		}
		names := make([]string, len(bs))
		for i, b := range bs {
			names[i] = b.name()
		}
		return nil, fmt.Errorf("%w: %s=%q names no backend of this binary; valid: %s", ErrBackend, EnvBackend, forced, strings.Join(names, ", "))
	}
	why := make([]string, 0, len(bs))
	for _, b := range bs {
		err := b.usable(h)
		if err == nil {
			return b, nil
		}
		why = append(why, b.name()+": "+err.Error())
	}
	return nil, fmt.Errorf("%w: %s", ErrBackend, strings.Join(why, "; "))
}
