package delivery

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Large payloads travel out of band. A frame whose payload passes
// OutOfBand does not carry it over the bus: the sender copies it once
// into a buffer of its own (ibverbs shared memory, which peers on its host
// map and peers elsewhere read over the tcp backend's parallel streams,
// or verbs where there is a device), and the frame carries a small
// reference (FlagOutOfBand). The receiver asks the buffer's owner whether
// it serves the buffer the reference names (ibverbs Handle.Check), then
// reads the bytes into memory of its own (one copy), tells the sender it
// is done (KindRelease), and hands the frame on with its payload in
// place. Later frames of the same sender wait behind it, so that order is
// kept. The sender reuses the buffer once every receiver let it go, or a
// receiver ended; it frees what nobody released within OutOfBandHold.
//
// A reference is a peer's word, and a buggy peer's may be wrong: it may
// name a buffer its owner does not serve (a made-up key, another
// process's buffer on the host), claim more bytes than there are, or an
// owner that accepts and never answers. Nothing is allocated for it
// before the owner vouched for the buffer, and no read slot (oobFetches)
// is taken either, so that references nobody serves cannot keep other
// senders' payloads waiting; a sender has one payload read at a time, so
// it holds one slot at most. Each step is bounded by the tcp backend's
// bounds, seconds without progress: a stalled owner fails its payload to
// whoever waits for it (Config.Failed, naming it), and the sender's later
// frames go on.
const (
	// OutOfBand is the largest payload that crosses the bus.
	OutOfBand = 256 << 10
	// OutOfBandMemory bounds the bytes a sender holds for its receivers
	// at once; a send past it waits up to OutOfBandWait for room, then
	// fails. (A payload itself is bounded by Config.MaxPayload.)
	OutOfBandMemory = 4 << 30
	OutOfBandWait   = time.Minute
	// OutOfBandHold is how long a sender keeps a payload its receivers
	// did not release: past it the buffer is freed, and a late reader
	// gets an error.
	OutOfBandHold = 2 * time.Minute
	// oobSpare bounds the bytes of free buffers kept for reuse.
	oobSpare = 512 << 20
	// oobFetches bounds the payloads a receiver reads at once, once their
	// owners vouched for them; one sender reads one at a time.
	oobFetches = 4
	// oobQueued bounds the bytes of frames waiting behind a payload being
	// read, per sender, and oobQueuedAll for all senders: past either they
	// are lost (and said so).
	oobQueued    = 256 << 20
	oobQueuedAll = 1 << 30
	// oobFetchFor bounds one read, its check and its wait for a slot; the
	// tcp backend bounds each step by its progress, in seconds, on its own.
	oobFetchFor = 10 * time.Minute
)

// oobRef is what a frame sent out of band carries in place of its payload.
type oobRef struct {
	ID     uint64         `msgpack:"id"`
	Size   int            `msgpack:"size"`
	Handle ibverbs.Handle `msgpack:"h"`
	// Once: the sender will not reuse the buffer (it is past what it
	// keeps for reuse), so a reader lets go of its mapping once it read
	// it. A buffer it reuses stays mapped at its readers: on a host, a
	// mapping's first pass faults every page in, and later ones do not.
	Once bool `msgpack:"once,omitempty"`
}

// oobPool is a sender's buffers of payloads sent out of band: those its
// receivers still read, and free ones kept for reuse.
type oobPool struct {
	mu        sync.Mutex
	held      map[uint64]*oobHeld
	heldBytes int
	free      []*ibverbs.Buffer
	freeBytes int
	next      uint64
	room      chan struct{} // a send waiting for room is woken
}

type oobHeld struct {
	buf     *ibverbs.Buffer
	waiting map[string]bool // the receivers that have not released it
	at      time.Time
}

func newOOBPool() *oobPool {
	return &oobPool{held: map[uint64]*oobHeld{}, room: make(chan struct{}, 1)}
}

// oobSize is the size of the buffer a payload of size bytes takes:
// rounded up to a MiB, so that payloads of about one size reuse buffers.
func oobSize(size int) int { return (size + 1<<20 - 1) &^ (1<<20 - 1) }

// park copies a payload (its parts) into a buffer held for receivers,
// waiting (up to OutOfBandWait) for room.
func (p *oobPool) park(parts [][]byte, size int, receivers []string) (oobRef, error) {
	need := oobSize(size)
	if need > OutOfBandMemory {
		return oobRef{}, fmt.Errorf("%w: a payload of %d bytes: at most %d are held for receivers at once", wire.ErrTooLarge, size, OutOfBandMemory)
	}
	deadline := time.Now().Add(OutOfBandWait)
	p.mu.Lock()
	for p.heldBytes+need > OutOfBandMemory {
		p.mu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 {
			return oobRef{}, fmt.Errorf("%w: %d bytes of large payloads not yet read by their receivers after %v (at most %d)",
				wire.ErrTooLarge, p.heldBytes, OutOfBandWait, OutOfBandMemory)
		}
		select {
		case <-p.room:
		case <-time.After(min(wait, time.Second)):
		}
		p.mu.Lock()
	}
	buf := p.takeFree(need, size)
	p.heldBytes += need
	p.next++
	id := p.next
	p.mu.Unlock()
	if buf == nil {
		var err error
		if buf, err = ibverbs.NewBuffer(need); err != nil {
			p.unreserve(need)
			return oobRef{}, fmt.Errorf("delivery: a buffer for a payload of %d bytes: %w", size, err)
		}
	}
	mem, at := buf.Bytes(), 0
	for _, part := range parts {
		at += copy(mem[at:], part)
	}
	waiting := make(map[string]bool, len(receivers))
	for _, r := range receivers {
		waiting[r] = true
	}
	p.mu.Lock()
	p.held[id] = &oobHeld{buf: buf, waiting: waiting, at: time.Now()}
	p.mu.Unlock()
	return oobRef{ID: id, Size: size, Handle: buf.Handle(), Once: !reusable(need)}, nil
}

// takeFree takes a free buffer of at least need bytes and at most twice
// size's, or nil. Hold mu.
func (p *oobPool) takeFree(need, size int) *ibverbs.Buffer {
	for i, b := range p.free {
		if n := len(b.Bytes()); n >= need && n <= 2*max(need, size) {
			p.free = slices.Delete(p.free, i, i+1)
			p.freeBytes -= n
			return b
		}
	}
	return nil
}

// reusable: a buffer of n bytes may be kept for reuse.
func reusable(n int) bool { return n <= oobSpare/2 }

func (p *oobPool) unreserve(n int) {
	p.mu.Lock()
	p.heldBytes -= n
	p.mu.Unlock()
	p.wake()
}

func (p *oobPool) wake() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// release says receiver from is done with payload id (or will never
// read it); a payload nobody waits for any more is free for reuse.
func (p *oobPool) release(from string, id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.held[id]; h != nil && h.waiting[from] {
		delete(h.waiting, from)
		if len(h.waiting) == 0 {
			p.done(id, h, true)
		}
	}
}

// done lets payload id go: its buffer is kept for reuse, or freed. Hold
// mu.
func (p *oobPool) done(id uint64, h *oobHeld, reuse bool) {
	delete(p.held, id)
	n := len(h.buf.Bytes())
	p.heldBytes -= n
	if reuse && reusable(n) && p.freeBytes+n <= oobSpare {
		p.free = append(p.free, h.buf)
		p.freeBytes += n
	} else {
		h.buf.Close()
	}
	p.wake()
}

// procGone releases everything proc had not.
func (p *oobPool) procGone(proc string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, h := range p.held {
		if h.waiting[proc] {
			delete(h.waiting, proc)
			if len(h.waiting) == 0 {
				p.done(id, h, true)
			}
		}
	}
}

// expire frees payloads held past OutOfBandHold. Their buffers are not
// reused: a receiver may still be reading.
func (p *oobPool) expire(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, h := range p.held {
		if now.Sub(h.at) > OutOfBandHold {
			p.done(id, h, false)
		}
	}
}

// close frees every buffer.
func (p *oobPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, h := range p.held {
		p.done(id, h, false)
	}
	for _, b := range p.free {
		b.Close()
	}
	p.free, p.freeBytes = nil, 0
}

// sendLarge sends a frame whose payload passes OutOfBand to ds: the
// payload goes into a held buffer (copied, outside the send lock), the
// frames carry a reference to it.
func (l *Layer) sendLarge(w *wire.Writer, h *wire.Header, ds []Dest) error {
	var receivers []string
	for _, d := range ds {
		switch {
		case d.proc != "":
			receivers = append(receivers, d.proc)
		case d.seq != nil:
			for p := range d.seq.Group {
				receivers = append(receivers, p)
			}
		}
	}
	ref, err := l.pool.park(w.Parts(), w.PayloadSize(), receivers)
	if err != nil {
		return err
	}
	rw := wire.NewPayload(h, 64<<10)
	defer rw.Free()
	if err := rw.Enc.Encode(&ref); err != nil {
		l.dropParked(ref.ID)
		return fmt.Errorf("delivery: encode a payload's reference: %w", err)
	}
	h.Flags |= wire.FlagOutOfBand
	defer func() { h.Flags &^= wire.FlagOutOfBand }()
	l.outMu.Lock()
	defer l.outMu.Unlock()
	l.flushRun()
	for i, d := range ds {
		l.resolve(&d)
		if err := l.sendOne(rw, h, d); err != nil {
			if i == 0 {
				l.dropParked(ref.ID) // nobody was told of it
			}
			return err
		}
	}
	return nil
}

// dropParked frees a payload whose frame could not be sent.
func (l *Layer) dropParked(id uint64) {
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	if h := l.pool.held[id]; h != nil {
		l.pool.done(id, h, true)
	}
}

// release takes a receiver's word that it is done with a payload.
func (l *Layer) release(f *wire.Frame, subject string) {
	id, err := wire.ReadRelease(f.Payload)
	if err != nil || !wire.ValidID(f.ReplyTo) {
		l.cfg.Drop(wire.DropBody, subject, fmt.Errorf("a release from %.40q: %v", f.ReplyTo, err))
		return
	}
	l.pool.release(f.ReplyTo, id)
}

// The receive side. parked holds, per sender, the frames waiting behind
// a payload being read; it is guarded by inMu.

type parkedSender struct {
	queue []queuedFrame
	bytes int
}

type queuedFrame struct {
	f       wire.Frame
	subject string
}

// deliver routes a frame from sender from that the inbox delivered: now,
// or behind a payload of the same sender being read; one sent out of
// band is read first. Hold inMu.
func (l *Layer) deliver(from string, f *wire.Frame, subject string) {
	if p := l.parked[from]; p != nil {
		if n := len(f.Payload); p.bytes+n > oobQueued || l.parkedBytes+n > oobQueuedAll {
			l.cfg.Lost(from, l.cfg.Subjects.Key(subject), fmt.Sprintf("held more than %d bytes of it (%d of all senders) behind a large payload being read",
				oobQueued, oobQueuedAll))
			return
		}
		p.queue = append(p.queue, queuedFrame{*f, subject})
		p.bytes += len(f.Payload)
		l.parkedBytes += len(f.Payload)
		return
	}
	if f.Flags&wire.FlagOutOfBand == 0 {
		l.cfg.Route(f, subject)
		return
	}
	l.fetch(from, *f, subject)
}

// fetch reads the payload of f, a frame sent out of band, in the
// background, and routes it and what waits behind it once it is here; it
// reports whether it started (a reference that does not check is
// answered at once). Hold inMu.
func (l *Layer) fetch(from string, f wire.Frame, subject string) bool {
	var ref oobRef
	err := wire.DecodePayload(f.Payload, oobRefTypes, func(d *msgpack.Decoder) error { return d.Decode(&ref) })
	switch {
	case err != nil:
	case ref.ID == 0 || ref.Size <= 0 || ref.Size > l.cfg.MaxPayload || ref.Handle.Size < ref.Size:
		err = fmt.Errorf("%w: a payload of %d bytes (id %d) in a buffer of %d (at most %d)", wire.ErrDecode, ref.Size, ref.ID, ref.Handle.Size, l.cfg.MaxPayload)
	}
	if err != nil {
		f.Flags &^= wire.FlagOutOfBand
		l.cfg.Failed(&f, subject, fmt.Errorf("delivery: the payload of a frame from %s: %w", from, err))
		return false
	}
	if l.parked[from] == nil {
		l.parked[from] = &parkedSender{}
	}
	go func() {
		data, err := l.readPayload(ref)
		if ref.Once {
			ref.Handle.Forget()
		}
		h := wire.Header{Kind: wire.KindRelease, ReplyTo: l.cfg.Self, Rank: -1}
		l.sendTransport(l.cfg.Subjects.Proc(from), &h, wire.AppendRelease(nil, ref.ID))

		l.inMu.Lock()
		defer l.unlockIn()
		f.Flags &^= wire.FlagOutOfBand
		if err != nil {
			if errors.Is(err, ibverbs.ErrClosed) {
				err = fmt.Errorf("the buffer named is not served (the sender ended, or held it past %v, or never had it): %w", OutOfBandHold, err)
			}
			l.cfg.Failed(&f, subject, fmt.Errorf("delivery: read the payload of %d bytes of a frame from %s, in the buffer of %d bytes at %s: %w",
				ref.Size, from, ref.Handle.Size, ref.Handle.Addr, err))
		} else {
			f.Payload = data
			l.cfg.Route(&f, subject)
		}
		p := l.parked[from]
		for len(p.queue) > 0 {
			q := p.queue[0]
			p.queue[0] = queuedFrame{}
			p.queue = p.queue[1:]
			p.bytes -= len(q.f.Payload)
			l.parkedBytes -= len(q.f.Payload)
			if q.f.Flags&wire.FlagOutOfBand != 0 && l.fetch(from, q.f, q.subject) {
				return
			}
			if q.f.Flags&wire.FlagOutOfBand == 0 {
				l.cfg.Route(&q.f, q.subject)
			}
		}
		delete(l.parked, from)
	}()
	return true
}

// readPayload reads the payload ref names into memory of this process:
// once its owner vouched for the buffer (Check), and in one of the
// layer's read slots.
func (l *Layer) readPayload(ref oobRef) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), oobFetchFor)
	defer cancel()
	if err := ref.Handle.Check(ctx); err != nil {
		return nil, err
	}
	select {
	case l.fetches <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("no read slot free within %v", oobFetchFor)
	}
	defer func() { <-l.fetches }()
	data := payloadMemory(ref.Size)
	if err := ref.Handle.ReadAt(ctx, data, 0); err != nil {
		return nil, err
	}
	return data, nil
}

var oobRefTypes = []reflect.Type{reflect.TypeFor[oobRef]()}
