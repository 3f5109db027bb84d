package collective

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/monarch-go/monarch/ibverbs"
)

// WaitBound bounds every wait of a collective, whatever ctx says.
var WaitBound = 10 * time.Minute

// testHookConnect, set by tests, runs before a member connects to its
// successor.
var testHookConnect func()

// probeEvery is how often a waiting member checks that the peer it waits
// for is still there.
const probeEvery = 100 * time.Millisecond

// The ring's links: send to the successor, receive from the predecessor,
// through the slots of the receiver's buffer (see the package doc).

func (g *group) succ() int { return g.ranks[(g.me+1)%g.size] }
func (g *group) pred() int { return g.ranks[(g.me+g.size-1)%g.size] }

// streamPiece is what a link through tcp writes at a time (or a slot, if
// smaller): the grain of the ring's pipeline (a piece goes on as soon as
// it is in). Each piece costs a hand-off between the member's sending
// and receiving goroutines, and on a host with more procs than cores
// that is a thread's wake-up: at 256 KiB, the 4-proc all-reduce of 64
// MiB on 2 cores spent about a fifth more CPU than at 1 MiB (which is as
// cheap as 4 MiB), while 1 MiB still cuts a 16 MiB all-reduce's chunks
// (4 MiB on 4 procs) into 4 pieces to pipeline.
const streamPiece = 1 << 20

// readPiece is what a link through tcp reads at a time (or a slot, if
// smaller): a piece to combine is read into scratch memory of this size,
// still in cache when it is combined. The ends of a stream need not agree
// on it: what one writes, the other may read in any pieces.
const readPiece = 256 << 10

// link is how a ring link moves messages. Through shared memory (or
// verbs), through the receiver's two slots: a message a slot (pieces of
// a slot's size), written then announced by a fetch-and-add, each
// acknowledged before its slot is taken again: two copies, no round
// trip. Through tcp, on a connection from the sender to the receiver
// (ibverbs Handle.Connect, Buffer.Accept), kept across collectives: the
// sender writes its pieces one after the other and the receiver reads
// each straight where it goes (into scratch memory when it combines it),
// paced by TCP's flow control: one copy each way, as a socket costs, and
// nothing else to wait for.
type link struct {
	size int  // a piece's bytes
	conn bool // on a connection, else through the receiver's slots
}

// word is the link as the headers of the direct rounds say it.
func (l link) word() uint64 {
	if l.conn {
		return 1<<62 | uint64(l.size)
	}
	return uint64(l.size)
}

// linkOf is the link a header's word says.
func linkOf(word uint64) link {
	return link{size: int(word &^ (1 << 62)), conn: word&(1<<62) != 0}
}

func (l link) String() string {
	if l.conn {
		return fmt.Sprintf("a stream of %d-byte pieces", l.size)
	}
	return fmt.Sprintf("slots of %d bytes", l.size)
}

// linkTo is the link to or from the member rank: both ends of a link
// reach each other through the same backend (shm on one host, tcp
// between hosts, or the one MONARCH_RDMA_BACKEND forces), so both pick
// the same; the ring's header round checks that they do (linkWord).
func (g *group) linkTo(rank int) link {
	if g.c.Handles[rank].Backend() == "tcp" {
		return link{size: min(streamPiece, g.c.SlotBytes), conn: true}
	}
	return link{size: g.c.SlotBytes}
}

// linkWord says what link this member sends to its successor on, for
// the headers of the direct rounds.
func (g *group) linkWord() uint64 {
	if g.size < 2 {
		return 0
	}
	return g.linkTo(g.succ()).word()
}

// send sends msgs, one after the other, to the successor, a piece at a
// time.
//
// ready, if not nil, is called before each piece with the message's index
// and where the piece ends in it, and may hold it back (pipeline).
func (g *group) send(ctx context.Context, msgs [][]byte, ready func(k, end int) error) error {
	to := g.succ()
	ln := g.linkTo(to)
	if ln.conn {
		return g.sendConn(ctx, to, ln, msgs, ready)
	}
	h, area := g.c.Handles[to], g.area
	return eachPiece(msgs, ln.size, ready, func(piece []byte) error {
		m := g.l.sent[g.dim]
		// At most two messages in flight: a slot is free once the
		// message that was in it is consumed.
		if m >= 2 {
			if err := g.wait(ctx, area+offAcked, m-1, to, "waiting for the successor to consume"); err != nil {
				return err
			}
		}
		if err := h.WriteAdd(ctx, piece, area+ctlBytes+int(m%2)*ln.size, area+offReceived, 1); err != nil {
			return g.peerErr("sending to", to, err)
		}
		g.l.sent[g.dim]++
		return nil
	})
}

// eachPiece hands msgs, one after the other, to send in pieces of size
// bytes, each after ready (if not nil) let it go: ready is told the
// message's index and where the piece ends in it.
func eachPiece(msgs [][]byte, size int, ready func(k, end int) error, send func(piece []byte) error) error {
	for k, data := range msgs {
		for end := 0; end < len(data); {
			piece := data[end:min(len(data), end+size)]
			end += len(piece)
			if ready != nil {
				if err := ready(k, end); err != nil {
					return err
				}
			}
			if err := send(piece); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendConn is send on a link through a connection.
func (g *group) sendConn(ctx context.Context, to int, ln link, msgs [][]byte, ready func(k, end int) error) (err error) {
	c := g.l.outs[g.dim]
	if c == nil {
		if testHookConnect != nil {
			testHookConnect()
		}
		if c, err = g.c.Handles[to].Connect(ctx, g.connTag(g.ranks[g.me])); err != nil {
			return g.failed(ctx, g.peerErr("connecting to", to, err))
		}
		g.l.outs[g.dim] = c
	}
	stop := context.AfterFunc(ctx, func() { c.Close() }) // a write blocked on it returns
	defer func() {
		if !stop() || err != nil {
			c.Close() // the next collective connects anew
			g.l.outs[g.dim] = nil
		}
	}()
	return eachPiece(msgs, ln.size, ready, func(piece []byte) error {
		if _, err := c.Write(piece); err != nil {
			return g.failed(ctx, g.peerErr("sending to", to, err))
		}
		g.moved()
		return nil
	})
}

// connTag is the tag of the connection from the member rank to its ring
// successor along this group's dimension.
func (g *group) connTag(rank int) uint64 { return uint64(g.dim)<<32 | uint64(rank) }

// recv takes len(into) bytes from the predecessor, a piece at a time,
// each combined into the piece of into it is for by combine, or copied
// there if combine is nil; then done, if not nil, is told where the
// piece ends in into.
func (g *group) recv(ctx context.Context, into []byte, combine func(dst, piece []byte), done func(end int)) error {
	from := g.pred()
	ln := g.linkTo(from)
	if ln.conn {
		return g.recvConn(ctx, from, ln, into, combine, done)
	}
	h, area := g.c.Handles[from], g.area
	mem := g.l.buf.Bytes()
	for off := 0; off < len(into); {
		n := min(len(into)-off, ln.size)
		r := g.l.received[g.dim]
		if err := g.wait(ctx, area+offReceived, r+1, from, "waiting for the predecessor's data"); err != nil {
			return err
		}
		at := area + ctlBytes + int(r%2)*ln.size
		if combine == nil {
			copy(into[off:off+n], mem[at:at+n])
		} else {
			combine(into[off:off+n], mem[at:at+n])
		}
		if _, err := h.FetchAdd(ctx, area+offAcked, 1); err != nil {
			return g.peerErr("acknowledging", from, err)
		}
		g.l.received[g.dim]++
		off += n
		if done != nil {
			done(off)
		}
	}
	return nil
}

// recvConn is recv on a link through a connection, in pieces of
// readPiece: a piece to copy is read where it goes, one to combine into
// scratch memory first.
func (g *group) recvConn(ctx context.Context, from int, ln link, into []byte, combine func(dst, piece []byte), done func(end int)) (err error) {
	c := g.l.ins[g.dim]
	if c == nil {
		if c, err = g.l.buf.Accept(ctx, g.connTag(from)); err != nil {
			return g.failed(ctx, fmt.Errorf("collective: waiting for %s to connect: %w", g.name(from), err))
		}
		g.l.ins[g.dim] = c
	}
	stop := context.AfterFunc(ctx, func() { c.Close() }) // a read blocked on it returns
	defer func() {
		if !stop() || err != nil {
			c.Close()
			g.l.ins[g.dim] = nil
		}
	}()
	grain := min(readPiece, ln.size)
	var scratch []byte
	if combine != nil {
		if len(g.l.scratch) < grain {
			g.l.scratch = make([]byte, grain)
		}
		scratch = g.l.scratch
	}
	for off := 0; off < len(into); {
		n := min(len(into)-off, grain)
		dst := into[off : off+n]
		if combine == nil {
			_, err = io.ReadFull(c, dst)
		} else if _, err = io.ReadFull(c, scratch[:n]); err == nil {
			combine(dst, scratch[:n])
		}
		if err != nil {
			return g.failed(ctx, g.peerErr("receiving from", from, err))
		}
		g.moved()
		off += n
		if done != nil {
			done(off)
		}
	}
	return nil
}

// guarded runs f, which moves data on this member's links. Where one of
// them is a connection, it runs under a guard: every probeEvery it checks
// that the peers it streams with are still there, and it ends ctx, whose
// end closes the connections (so that a read or write blocked on one
// returns), when a peer fails its check or nothing moved for WaitBound.
// f's failure is then the guard's reason (failed). (Links through slots
// check on their peer as they wait: wait.)
func (g *group) guarded(ctx context.Context, f func(ctx context.Context) error) error {
	if !g.linkTo(g.pred()).conn && !g.linkTo(g.succ()).conn {
		return f(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g.moved()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := g.checkPeers(ctx); err != nil {
				cancel(err)
				return
			}
		}
	}()
	err := g.failed(ctx, f(ctx))
	cancel(nil)
	<-ended
	return err
}

// checkPeers is the guard's check: both neighbours answer a read of
// their buffer, and data moved within WaitBound. A read may take no
// longer than what is left of that bound (a peer whose host vanished
// answers nothing at all).
func (g *group) checkPeers(ctx context.Context) error {
	idleEnd := time.Unix(0, g.last.Load()).Add(WaitBound)
	pctx, cancel := context.WithDeadline(ctx, idleEnd)
	defer cancel()
	for _, peer := range []int{g.pred(), g.succ()} {
		var probe [8]byte
		if err := g.c.Handles[peer].ReadAt(pctx, probe[:], 0); err != nil {
			if ctx.Err() != nil || time.Now().Before(idleEnd) {
				return g.peerErr("checking on", peer, err)
			}
			break // out of time: whether data moved meanwhile decides
		}
	}
	if time.Since(time.Unix(0, g.last.Load())) > WaitBound {
		return fmt.Errorf("collective: nothing from %s or to %s for %v", g.name(g.pred()), g.name(g.succ()), WaitBound)
	}
	return nil
}

// moved notes, for the guard, that data moved.
func (g *group) moved() { g.last.Store(time.Now().UnixNano()) }

// failed is err, or why ctx ended if it did: a failure that closing the
// connections caused says the cause, not the closing.
func (g *group) failed(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(err, cause) {
			return fmt.Errorf("collective: %w", cause)
		}
	}
	return err
}

// exchange sends out to the successor while it receives into from the
// predecessor: every member sends first, so sends must not wait for
// receives.
func (g *group) exchange(ctx context.Context, out, into []byte, combine func(dst, piece []byte)) error {
	sent := make(chan error, 1)
	go func() { sent <- g.send(ctx, [][]byte{out}, nil) }()
	err := g.recv(ctx, into, combine, nil)
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
// the predecessor, each piece of it combined into in by combine, or
// copied there if combine is nil.
type step struct {
	out, in []byte
	combine func(dst, piece []byte)
}

// ring runs steps one after the other, except where both of this
// member's links are connections (tcp): there it pipelines them. Moving
// data on connections, it runs guarded.
func (g *group) ring(ctx context.Context, steps []step) error {
	pred, succ := g.linkTo(g.pred()), g.linkTo(g.succ())
	run := func(ctx context.Context) error {
		if pred.conn && succ.conn {
			return g.pipeline(ctx, steps)
		}
		for _, s := range steps {
			if err := g.exchange(ctx, s.out, s.in, s.combine); err != nil {
				return err
			}
		}
		return nil
	}
	return g.guarded(ctx, run)
}

// pipeline runs steps as one stream: what a step sends is what the step
// before received (the ring's chunk that moves on), so each piece of it
// goes as soon as it is in, rather than when all the step before is.
// The steps' sends go on one goroutine, their receives on this one; a
// failure of either ends the other.
//
// A step may also receive into what an earlier step sent (all-reduce's
// all-gather, into the chunks its reduce-scatter sent first): it does so
// only once the send of that step has returned. The ring orders it so
// anyway (what comes back is built on what was sent, which its write had
// copied out), but the send's goroutine may not have returned from its
// write yet, and so nothing in this process would say so.
func (g *group) pipeline(ctx context.Context, steps []step) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu       sync.Mutex
		recvd    = sync.NewCond(&mu) // the receives moved on
		sentc    = sync.NewCond(&mu) // the sends moved on
		at       = -1                // the step last received into
		got      = 0                 // how much of it is in
		failed   error               // the receives' failure
		sentUpTo = -1                // the steps whose sends returned
		sendEnd  = false             // the sends are over (done or failed)
		// what the waiting send waits for (step, end), if it waits:
		// the receives wake it only once that is in, not at every
		// piece they read (a wake-up is a thread's on a busy host)
		waitAt, waitEnd = -1, 0
	)
	in := func(k, end int) bool { return at > k || at == k && got >= end }
	sent := make(chan error, 1)
	outs := make([][]byte, len(steps))
	for k, s := range steps {
		outs[k] = s.out
	}
	sendsDone := func(k int, end bool) {
		mu.Lock()
		sentUpTo, sendEnd = max(sentUpTo, k), sendEnd || end
		mu.Unlock()
		sentc.Signal()
	}
	go func() {
		sending := 0
		err := g.send(ctx, outs, func(k, end int) error {
			if k == 0 {
				return nil
			}
			if k > sending { // the sends before k returned
				sending = k
				sendsDone(k-1, false)
			}
			mu.Lock()
			defer mu.Unlock()
			for failed == nil && !in(k-1, end) {
				waitAt, waitEnd = k-1, end
				recvd.Wait()
			}
			waitAt = -1
			return failed
		})
		if err != nil {
			cancel(err)
		}
		sendsDone(len(steps)-1, true)
		sent <- err
	}()
	mark := func(k, end int) {
		mu.Lock()
		at, got = k, end
		wake := waitAt >= 0 && in(waitAt, waitEnd)
		mu.Unlock()
		if wake {
			recvd.Signal()
		}
	}
	var err error
	for k, s := range steps {
		if i := lastSent(steps, k); i >= 0 {
			mu.Lock()
			for sentUpTo < i && !sendEnd {
				sentc.Wait()
			}
			mu.Unlock()
		}
		if err = g.recv(ctx, s.in, s.combine, func(end int) { mark(k, end) }); err != nil {
			break
		}
		mark(k, len(s.in))
	}
	if err != nil {
		mu.Lock()
		failed = err
		mu.Unlock()
		recvd.Broadcast()
		cancel(err) // and a send waiting for the successor stops
	}
	if serr := <-sent; serr != nil && !errors.Is(serr, err) {
		return serr // the first: the receives' then failed for it
	}
	return err
}

// lastSent is the last step before k that sends from memory step k
// receives into, or -1.
func lastSent(steps []step, k int) int {
	in := steps[k].in
	for i := k - 1; i >= 0; i-- {
		if overlap(steps[i].out, in) {
			return i
		}
	}
	return -1
}

// overlap tells whether a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}
