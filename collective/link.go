package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// streamPieces is how many pieces a link through tcp cuts its two slots
// in: so many messages in flight, each announced with its write.
const streamPieces = 8

// link is how a ring link moves messages through the receiver's two
// slots: in pieces of size bytes, each in its own part of the slots, at
// most pieces of them in flight. A link through shared memory (or verbs)
// keeps a message a slot (two in flight), written then announced by a
// fetch-and-add, each acknowledged before the next is taken: two copies,
// no round trip. A link through tcp streams: smaller pieces, up to
// streamPieces in flight, each written and announced in one request
// (Handle.WriteAdd), acknowledged in batches in the background, so that
// the sender never waits for the receiver's round trip and the receiver
// combines a piece while the next ones arrive.
type link struct {
	pieces int
	size   int
	stream bool
}

// linkTo is the link to or from the member rank: both ends of a link
// reach each other through the same backend (shm on one host, tcp
// between hosts, or the one MONARCH_RDMA_BACKEND forces), so both pick
// the same; the ring's header round checks that they do (linkWord).
func (g *group) linkTo(rank int) link {
	slot := g.c.SlotBytes
	if g.c.Handles[rank].Backend() == "tcp" && slot%(8*streamPieces/2) == 0 {
		return link{pieces: streamPieces, size: 2 * slot / streamPieces, stream: true}
	}
	return link{pieces: 2, size: slot}
}

// linkWord says what link this member sends to its successor on, for
// the headers of the direct rounds: its pieces' size.
func (g *group) linkWord() uint64 {
	if g.size < 2 {
		return 0
	}
	return uint64(g.linkTo(g.succ()).size)
}

// send writes msgs, one after the other, into the successor's slots, a
// piece at a time: on a link that streams, through the member's stream
// to it, answered at the end.
//
// ready, if not nil, is called before each piece with the message's index
// and where the piece ends in it, and may hold it back (pipeline).
func (g *group) send(ctx context.Context, msgs [][]byte, ready func(k, end int) error) (err error) {
	to := g.succ()
	h, area, ln := g.c.Handles[to], g.area, g.linkTo(to)
	writeAdd := h.WriteAdd
	if ln.stream {
		s, err := g.stream(to)
		if err != nil {
			return g.peerErr("sending to", to, err)
		}
		writeAdd = s.WriteAdd
		defer func() {
			if err == nil {
				if ferr := s.Flush(ctx); ferr != nil {
					err = g.peerErr("sending to", to, ferr)
				}
			}
			if err != nil {
				s.Close() // the next collective dials anew
			}
		}()
	}
	for k, data := range msgs {
		for end := 0; end < len(data); {
			piece := data[end:min(len(data), end+ln.size)]
			end += len(piece)
			if ready != nil {
				if err := ready(k, end); err != nil {
					return err
				}
			}
			m := g.l.sent[g.dim]
			// At most ln.pieces messages in flight: the part is free
			// once the message that was in it is consumed.
			if m >= uint64(ln.pieces) {
				if err := g.wait(ctx, area+offAcked, m-uint64(ln.pieces)+1, to, "waiting for the successor to consume"); err != nil {
					return err
				}
			}
			if err := writeAdd(ctx, piece, area+ctlBytes+int(m%uint64(ln.pieces))*ln.size, area+offReceived, 1); err != nil {
				return g.peerErr("sending to", to, err)
			}
			g.l.sent[g.dim]++
		}
	}
	return nil
}

// stream is this member's stream to its successor rank, opened at first
// use.
func (g *group) stream(rank int) (*ibverbs.Stream, error) {
	if s := g.l.streams[g.dim]; s != nil {
		return s, nil
	}
	s, err := g.c.Handles[rank].NewStream()
	if err != nil {
		return nil, err
	}
	g.l.streams[g.dim] = s
	return s, nil
}

// recv takes len(into) bytes from the predecessor, a piece at a time,
// each handed to consume with the piece of into it is for; then done, if
// not nil, is told where the piece ends in into.
func (g *group) recv(ctx context.Context, into []byte, consume func(dst, piece []byte), done func(end int)) (err error) {
	from := g.pred()
	h, area, ln := g.c.Handles[from], g.area, g.linkTo(from)
	mem := g.l.buf.Bytes()
	ack := func(n uint64) error {
		if _, err := h.FetchAdd(ctx, area+offAcked, n); err != nil {
			return g.peerErr("acknowledging", from, err)
		}
		return nil
	}
	var acks *acker
	if ln.stream {
		acks = startAcker(ack)
		defer func() {
			if aerr := acks.stop(); err == nil {
				err = aerr
			}
		}()
	}
	for off := 0; off < len(into); {
		n := min(len(into)-off, ln.size)
		r := g.l.received[g.dim]
		if err := g.wait(ctx, area+offReceived, r+1, from, "waiting for the predecessor's data"); err != nil {
			return err
		}
		at := area + ctlBytes + int(r%uint64(ln.pieces))*ln.size
		consume(into[off:off+n], mem[at:at+n])
		if acks != nil {
			if err := acks.add(); err != nil {
				return err
			}
		} else if err := ack(1); err != nil {
			return err
		}
		g.l.received[g.dim]++
		off += n
		if done != nil {
			done(off)
		}
	}
	return nil
}

// acker acknowledges a streaming link's pieces in the background: all
// those consumed since its last acknowledgement in one fetch-and-add, so
// that the receiver goes on to the next piece at once.
type acker struct {
	ack     func(n uint64) error
	pending atomic.Uint64 // consumed, not yet acknowledged
	wake    chan struct{} // a token when pending may be > 0
	done    chan error    // the first failure, when the acker ends
	failed  atomic.Bool
}

func startAcker(ack func(n uint64) error) *acker {
	wake := make(chan struct{}, 1)
	a := &acker{ack: ack, wake: wake, done: make(chan error, 1)}
	go func() {
		var err error
		for range wake {
			if n := a.pending.Swap(0); n > 0 && err == nil {
				if err = a.ack(n); err != nil {
					a.failed.Store(true)
				}
			}
		}
		if n := a.pending.Swap(0); n > 0 && err == nil {
			err = a.ack(n)
		}
		a.done <- err
	}()
	return a
}

// add counts a piece consumed; an error once an acknowledgement failed.
func (a *acker) add() error {
	if a.failed.Load() {
		return a.stop()
	}
	a.pending.Add(1)
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return nil
}

// stop acknowledges what is left, ends the acker and returns its first
// failure; once.
func (a *acker) stop() error {
	if a.wake == nil {
		return nil
	}
	close(a.wake)
	a.wake = nil
	return <-a.done
}

// exchange sends out to the successor while it receives into from the
// predecessor: every member sends first, so sends must not wait for
// receives.
func (g *group) exchange(ctx context.Context, out, into []byte, consume func(dst, piece []byte)) error {
	sent := make(chan error, 1)
	go func() { sent <- g.send(ctx, [][]byte{out}, nil) }()
	err := g.recv(ctx, into, consume, nil)
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

// step is one step of the ring: out to the successor while in comes from
// the predecessor, each piece of it handed to consume.
type step struct {
	out, in []byte
	consume func(dst, piece []byte)
}

// ring runs steps one after the other, except where both of this
// member's links stream (tcp): there it pipelines them.
func (g *group) ring(ctx context.Context, steps []step) error {
	if g.linkTo(g.succ()).stream && g.linkTo(g.pred()).stream {
		return g.pipeline(ctx, steps)
	}
	for _, s := range steps {
		if err := g.exchange(ctx, s.out, s.in, s.consume); err != nil {
			return err
		}
	}
	return nil
}

// pipeline runs steps as one stream: what a step sends is what the step
// before received (the ring's chunk that moves on), so each piece of it
// goes as soon as it is in, rather than when all the step before is.
// The steps' sends go on one goroutine, their receives on this one; a
// failure of either ends the other.
func (g *group) pipeline(ctx context.Context, steps []step) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		at     = -1  // the step last received into
		got    = 0   // how much of it is in
		failed error // the receives' failure
	)
	sent := make(chan error, 1)
	outs := make([][]byte, len(steps))
	for k, s := range steps {
		outs[k] = s.out
	}
	go func() {
		err := g.send(ctx, outs, func(k, end int) error {
			if k == 0 {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			for failed == nil && (at < k-1 || at == k-1 && got < end) {
				cond.Wait()
			}
			return failed
		})
		if err != nil {
			cancel(err)
		}
		sent <- err
	}()
	mark := func(k, end int) {
		mu.Lock()
		at, got = k, end
		mu.Unlock()
		cond.Broadcast()
	}
	var err error
	for k, s := range steps {
		if err = g.recv(ctx, s.in, s.consume, func(end int) { mark(k, end) }); err != nil {
			break
		}
		mark(k, len(s.in))
	}
	if err != nil {
		mu.Lock()
		failed = err
		mu.Unlock()
		cond.Broadcast()
		cancel(err) // and a send waiting for the successor stops
	}
	if serr := <-sent; serr != nil && !errors.Is(serr, err) {
		return serr // the first: the receives' then failed for it
	}
	return err
}
