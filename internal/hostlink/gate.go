package hostlink

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/door"
)

// What the watcher spends on peers that have not proven themselves:
// anyone on the network may dial it. Its door (internal/door) holds a
// peer that sends nothing, a socket and no goroutine, and reads one that
// speaks (its TLS hello, over plain TCP its greeting) within these
// bounds; the proof itself is the watcher's (admit).
const (
	// maxPending bounds the handshakes under way, all sources together.
	maxPending = 512
	// maxPendingPerSource bounds those of one source (door.SourceOf).
	maxPendingPerSource = 32
	// helloWait bounds a peer's time from its first byte to its proof
	// (the TLS handshake and its hello line).
	helloWait = 5 * time.Second
	// holdWait is the least time a peer that sends nothing is held; each
	// is let go between it and twice it. Letting it go sooner would only
	// make a flood open another sooner.
	holdWait = 30 * time.Second
	// maxHeld bounds the peers held, silent; the doors of a process
	// together hold at most two thirds of its descriptors.
	maxHeld = 1 << 16
	// A source whose peer failed to prove itself (a wrong or late proof,
	// a malformed line, or displaced while proving) is not read for
	// penaltyFirst, doubled for each failure that follows within
	// penaltyMost of the last penalty's end, up to penaltyMost; a proof
	// forgives it. Its peers wait, held, meanwhile.
	penaltyFirst = 10 * time.Millisecond
	penaltyMost  = time.Second
	// maxDecodes bounds the MUNGE credentials decoded at once (a process
	// each), all sources together; a source decodes one at a time.
	maxDecodes = 4
	// decodeWait bounds a proof's wait for its decode: then the peer is
	// told the watcher is busy, and a real agent tries again.
	decodeWait = 3 * time.Second
)

// doorLimits are the bounds of a watcher's door.
var doorLimits = door.Limits{Prove: helloWait, Hold: holdWait, Held: maxHeld, Reading: maxPending,
	PerSource: maxPendingPerSource, PenaltyFirst: penaltyFirst, PenaltyMost: penaltyMost}

// decodes bounds the MUNGE credentials decoded at once: maxDecodes in
// all, one per source, so that no source takes the decodes the others
// need. Safe for concurrent use.
type decodes struct {
	all chan struct{} // a slot per decode under way

	mu       sync.Mutex
	bySource map[netip.Prefix]*turn
}

// turn is a source's one decode, and how many of its proofs want it.
type turn struct {
	slot  chan struct{}
	wants int
}

func newDecodes() *decodes {
	return &decodes{all: make(chan struct{}, maxDecodes), bySource: map[netip.Prefix]*turn{}}
}

// take waits, until ctx ends, for source's turn, then for a decode of
// all; after each it asks (penalized) whether the source may go on: a
// proof of the source decoded before this one, or one that failed
// meanwhile, may have penalized it, and then this one waits its turn
// like a newcomer. release gives back what was taken.
func (d *decodes) take(ctx context.Context, source netip.Prefix, penalized func() bool) (release func(), err error) {
	d.mu.Lock()
	t := d.bySource[source]
	if t == nil {
		t = &turn{slot: make(chan struct{}, 1)}
		d.bySource[source] = t
	}
	t.wants++
	d.mu.Unlock()
	done := func() {
		d.mu.Lock()
		if t.wants--; t.wants == 0 {
			delete(d.bySource, source)
		}
		d.mu.Unlock()
	}
	select {
	case t.slot <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, errBusy
	}
	ours := func() { <-t.slot; done() }
	if penalized() {
		ours()
		return nil, errPenalized
	}
	select {
	case d.all <- struct{}{}:
	case <-ctx.Done():
		ours()
		return nil, errBusy
	}
	release = func() { <-d.all; ours() }
	if penalized() {
		release()
		return nil, errPenalized
	}
	return release, nil
}

// sources is how many sources have proofs waiting for a decode or in one.
func (d *decodes) sources() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.bySource)
}
