package actorrt

import (
	"slices"
	"sync"

	"github.com/monarch-go/monarch/internal/wire"
)

// A port is an address messages can be sent to: a proc and a number on it.
// Every reply in the runtime travels to a port: Call opens one that
// gathers a reply per member, CallOne one that takes a single reply, a
// channel (OpenChannel) one that queues whatever comes. The receiving side
// of a port is a portHandler.
type portHandler interface {
	// deliver takes one message for the port, on the dispatcher goroutine,
	// in arrival order. It returns false once the port wants no more.
	deliver(rt *core, f *wire.Frame) bool
	// fail ends the port with err (shutdown, lost proc, lost bus). It may be
	// called after the port is done; it must then do nothing.
	fail(err error)
}

// portTable holds the open ports of this proc. Port ids are handed out in
// order and never reused, so the ids ever opened are those up to next,
// and the fixed ones opened with openAt.
type portTable struct {
	mu    sync.Mutex
	next  uint64
	fixed []uint64 // ids opened with openAt
	m     map[uint64]portEntry
	err   error // once set (the proc is shutting down), open fails at once
}

type portEntry struct {
	h     portHandler
	waits []string // procs whose replies the port waits for: it fails if one dies
}

func (t *portTable) open(h portHandler, waits []string) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, t.err
	}
	if t.m == nil {
		t.m = map[uint64]portEntry{}
	}
	t.next++
	t.m[t.next] = portEntry{h, waits}
	return t.next, nil
}

// openAt opens a port at a fixed id, known to its senders in advance.
func (t *portTable) openAt(id uint64, h portHandler, waits []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]portEntry{}
	}
	t.m[id] = portEntry{h, waits}
	t.fixed = append(t.fixed, id)
}

// wasOpened reports whether id was ever opened here.
func (t *portTable) wasOpened(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return id != 0 && id <= t.next || slices.Contains(t.fixed, id)
}

func (t *portTable) get(id uint64) portHandler {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id].h
}

func (t *portTable) close(id uint64) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// failAll ends every open port with err, and every later open.
func (t *portTable) failAll(err error) {
	t.mu.Lock()
	es := t.m
	t.m = nil
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
	for _, e := range es {
		e.h.fail(err)
	}
}

// failWaiting ends every port that waits for a reply from proc.
func (t *portTable) failWaiting(proc string, err error) {
	var hs []portHandler
	t.mu.Lock()
	for id, e := range t.m {
		if slices.Contains(e.waits, proc) {
			hs = append(hs, e.h)
			delete(t.m, id)
		}
	}
	t.mu.Unlock()
	for _, h := range hs {
		h.fail(err)
	}
}

// rewait makes port id, if it waits for procs at all (a call's own reply
// port, not a channel), wait for procs instead: where the members of a
// queued call live once a restart settled (sendQueue).
func (t *portTable) rewait(id uint64, procs []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[id]; ok && e.waits != nil {
		e.waits = procs
		t.m[id] = e
	}
}
