package ibverbs

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Connections to a buffer's owner: a plain byte stream from a peer to the
// process that owns a buffer, for data whose order both ends agree on (a
// collective's ring link between hosts). What the peer writes, the owner
// reads straight into wherever it goes, paced by TCP's own flow control:
// no slot to copy out of, no counter to announce it, no acknowledgement.
// The peer asks the owner's tcp server for it with the request
//
//	'k' key(8) tag(8) len(8) = 0
//
// answered by status(1); after statusOK nothing more of the protocol
// goes on the connection: it waits under the buffer, by tag, for the
// owner's Accept. A connection is only ever a peer's to a buffer whose
// key it holds, as every request is.

// connectOp is the request of Connect.
const connectOp = 'k'

// maxParked bounds the connections that wait under one buffer for Accept:
// past it the server refuses more (statusRange).
const maxParked = 256

// Connect opens a byte stream to h's owner, which takes it with
// Buffer.Accept(tag): the tag says which of its peers' streams it is (the
// owner's and the peer's to agree on). It goes through the owner's tcp
// server whatever backend transfers to h use. ctx bounds the dialling
// and the request; the connection is the caller's to close.
func (h Handle) Connect(ctx context.Context, tag uint64) (net.Conn, error) {
	if h.Addr == "" {
		return nil, fmt.Errorf("ibverbs: connect: the handle has no TCP address")
	}
	ctx, cancel := context.WithTimeout(ctx, transferBound)
	defer cancel()
	c, err := dialOwner(ctx, h.Addr, h.TLS, connectBound)
	if err != nil {
		return nil, err
	}
	pc, stop := paced(ctx, c, clientProgressBound)
	defer stop()
	var req [headerLen]byte
	req[0] = connectOp
	binary.LittleEndian.PutUint64(req[1:9], h.Key)
	binary.LittleEndian.PutUint64(req[9:17], tag)
	var st [1]byte
	if _, err = pc.Write(req[:]); err == nil {
		_, err = io.ReadFull(pc, st[:])
	}
	if err == nil {
		err = statusErr(st[0])
	}
	if err == nil && !stop() {
		err = context.Cause(ctx)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ibverbs: connect to %s: %w", h.Addr, pc.why(err))
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// Accept waits, bounded by ctx, for the stream a peer opened to this
// buffer with Connect(tag), and returns it; the connection is the
// caller's to close. A peer that connects again under the same tag before
// the first was taken replaces it (the older is closed). ErrClosed once
// the buffer is closed.
func (b *Buffer) Accept(ctx context.Context, tag uint64) (net.Conn, error) {
	for {
		c, wake, err := b.parking().take(tag)
		if c != nil || err != nil {
			return c, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// parking is where a buffer's connections wait for Accept.
type parking struct {
	mu     sync.Mutex
	conns  map[uint64]net.Conn
	wake   chan struct{} // closed, and replaced, when a connection parks or the buffer closes
	closed bool
}

func (b *Buffer) parking() *parking {
	b.parkOnce.Do(func() { b.parked = &parking{conns: map[uint64]net.Conn{}, wake: make(chan struct{})} })
	return b.parked
}

// take is the connection under tag, if one waits; else the channel that
// is closed when that may change.
func (p *parking) take(tag uint64) (net.Conn, <-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, ErrClosed
	}
	if c, ok := p.conns[tag]; ok {
		delete(p.conns, tag)
		return c, nil, nil
	}
	return nil, p.wake, nil
}

// park leaves c under tag; false if the buffer is closed or holds
// maxParked already.
func (p *parking) park(tag uint64, c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.full(tag) {
		return false
	}
	if old, ok := p.conns[tag]; ok {
		old.Close()
	}
	p.conns[tag] = c
	close(p.wake)
	p.wake = make(chan struct{})
	return true
}

// full tells whether the buffer takes no connection under tag: it is
// closed, or holds maxParked under other tags. p.mu is held.
func (p *parking) full(tag uint64) bool {
	_, replaces := p.conns[tag]
	return p.closed || !replaces && len(p.conns) >= maxParked
}

// close closes the connections that wait and refuses more.
func (p *parking) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	close(p.wake)
}

// serveConnect serves a connectOp request for tag on c, whose requests r
// reads: it answers, then leaves c under the buffer for Accept and says
// so (handed: the caller no longer serves nor closes c), or refuses
// (statusNoSuch, statusRange) and c goes on serving.
func (p *process) serveConnect(c, raw net.Conn, r *bufio.Reader, key, tag, n uint64) (handed bool, err error) {
	if n != 0 {
		return false, fmt.Errorf("a connect request with %d bytes", n) // not this protocol
	}
	if r.Buffered() != 0 {
		// The peer sends nothing before the answer: what came after
		// the request would be lost to the reader.
		return false, fmt.Errorf("bytes after a connect request")
	}
	b := p.lookup(key)
	if b == nil {
		_, err := c.Write([]byte{statusNoSuch})
		return false, err
	}
	pk := b.parking()
	pk.mu.Lock()
	full := pk.full(tag)
	pk.mu.Unlock()
	if full {
		_, err := c.Write([]byte{statusRange})
		return false, err
	}
	if _, err := c.Write([]byte{statusOK}); err != nil {
		return false, err
	}
	raw.SetDeadline(time.Time{})
	if !pk.park(tag, raw) {
		raw.Close() // closed or filled meanwhile: the peer reads the end
	}
	return true, nil
}
