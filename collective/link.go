package collective

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/monarch-go/monarch/ibverbs"
)

// WaitBound bounds every wait of a collective, whatever ctx says.
var WaitBound = 10 * time.Minute

// probeEvery is how often a waiting member checks that the peer it waits
// for is still there.
const probeEvery = 100 * time.Millisecond

// The ring's links: send to the successor, receive from the predecessor,
// through the slots of the receiver's buffer (see the package doc).

func (g *group) succ() int { return g.ranks[(g.me+1)%g.size] }
func (g *group) pred() int { return g.ranks[(g.me+g.size-1)%g.size] }

// send writes data into the successor's slots, a piece at a time.
func (g *group) send(ctx context.Context, data []byte) error {
	to := g.succ()
	h, area, slot := g.c.Handles[to], g.area, g.c.SlotBytes
	for len(data) > 0 {
		piece := data[:min(len(data), slot)]
		m := g.l.sent[g.dim]
		// At most two messages in flight: the slot is free once the
		// message before the last is consumed.
		if m >= 2 {
			if err := g.wait(ctx, area+offAcked, m-1, to, "waiting for the successor to consume"); err != nil {
				return err
			}
		}
		if err := h.WriteAt(ctx, piece, area+ctlBytes+int(m%2)*slot); err != nil {
			return g.peerErr("sending to", to, err)
		}
		if _, err := h.FetchAdd(ctx, area+offReceived, 1); err != nil {
			return g.peerErr("sending to", to, err)
		}
		g.l.sent[g.dim]++
		data = data[len(piece):]
	}
	return nil
}

// recv takes len(into) bytes from the predecessor, a piece at a time,
// each handed to consume with the piece of into it is for.
func (g *group) recv(ctx context.Context, into []byte, consume func(dst, piece []byte)) error {
	from := g.pred()
	h, area, slot := g.c.Handles[from], g.area, g.c.SlotBytes
	mem := g.l.buf.Bytes()
	for off := 0; off < len(into); {
		n := min(len(into)-off, slot)
		r := g.l.received[g.dim]
		if err := g.wait(ctx, area+offReceived, r+1, from, "waiting for the predecessor's data"); err != nil {
			return err
		}
		at := area + ctlBytes + int(r%2)*slot
		consume(into[off:off+n], mem[at:at+n])
		if _, err := h.FetchAdd(ctx, area+offAcked, 1); err != nil {
			return g.peerErr("acknowledging", from, err)
		}
		g.l.received[g.dim]++
		off += n
	}
	return nil
}

// exchange sends out to the successor while it receives into from the
// predecessor: every member sends first, so sends must not wait for
// receives.
func (g *group) exchange(ctx context.Context, out, into []byte, consume func(dst, piece []byte)) error {
	sent := make(chan error, 1)
	go func() { sent <- g.send(ctx, out) }()
	err := g.recv(ctx, into, consume)
	if serr := <-sent; err == nil {
		err = serr
	}
	return err
}

// wait waits until the counter at off in this member's buffer reaches
// want, blocking on the word (Buffer.Wait: the peer's fetch-and-add wakes
// it) at most until the next probe; every probeEvery it reads a word of
// peer's buffer, so that a peer that is gone fails the wait. Where the
// peer is reached through the verbs backend, whose atomics wake nobody,
// it sleeps in short steps instead. It does not poll first: with more
// procs than cores (4 on this project's 2-core host), polling takes the
// core the peer needs to send: 20 µs of it made the 1 KiB all-reduce
// about 2x slower, 100 µs 4x.
func (g *group) wait(ctx context.Context, off int, want uint64, peer int, what string) error {
	words, err := ibverbs.View[uint64](g.l.buf)
	if err != nil {
		return err
	}
	w := &words[off/8]
	if atomic.LoadUint64(w) >= want {
		return nil
	}
	start := time.Now()
	poll := g.c.Handles[peer].Backend() == "verbs"
	lastProbe := start
	for i := 0; ; i++ {
		v := atomic.LoadUint64(w)
		if v >= want {
			return nil
		}
		now := time.Now()
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("collective: %s (%s): %w", what, g.name(peer), context.Cause(ctx))
		case now.Sub(start) > WaitBound:
			return fmt.Errorf("collective: %s (%s): nothing for %v", what, g.name(peer), WaitBound)
		case now.Sub(lastProbe) >= probeEvery:
			lastProbe = now
			var probe [8]byte
			if err := g.c.Handles[peer].ReadAt(ctx, probe[:], 0); err != nil {
				return g.peerErr(what+": checking on", peer, err)
			}
		}
		if poll {
			time.Sleep(min(time.Duration(i+1)*10*time.Microsecond, time.Millisecond))
			continue
		}
		if err := g.l.buf.Wait(off, v, max(probeEvery-now.Sub(lastProbe), time.Millisecond)); err != nil {
			return err
		}
	}
}

// name says which member rank is.
func (g *group) name(rank int) string {
	p, err := g.c.Procs.Point(rank)
	if err != nil {
		return fmt.Sprintf("member %d", rank)
	}
	return fmt.Sprintf("member %v (rank %d)", p, rank)
}

func (g *group) peerErr(what string, rank int, err error) error {
	return fmt.Errorf("collective: %s %s: %w", what, g.name(rank), err)
}

// bytesOf is s's memory as bytes.
func bytesOf[T Number](s []T) []byte { return ibverbs.Bytes(s) }

// as is b's memory as []T; b's length is a multiple of T's size and its
// memory aligned for T (slots and the callers' slices are).
func as[T Number](b []byte) []T {
	var zero T
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}
