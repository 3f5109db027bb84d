package ibverbs

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// WriteAdd copies src into the buffer from byte off on, then adds delta
// to the 8-byte word at byte word (a multiple of 8), waking its waiters
// (Buffer.Wait): a message and its announcement. A peer that sees the
// word's new value sees src in place. Through tcp it is one request
// ('W', see writeAddOp), one round trip instead of two; through shm a
// copy and an atomic on one mapping of the owner's memory, whose owner is
// checked once; through verbs a write, then a fetch-and-add. The word must lie
// outside the written span.
func (h Handle) WriteAdd(ctx context.Context, src []byte, off, word int, delta uint64) error {
	if !fits(h.Size, off, len(src)) {
		return fmt.Errorf("%w: write of %d bytes at offset %d of a buffer of %d", ErrRange, len(src), off, h.Size)
	}
	if word%8 != 0 || !fits(h.Size, word, 8) || word+8 > off && word < off+len(src) {
		return fmt.Errorf("%w: an add at offset %d after a write of %d bytes at %d, of a buffer of %d bytes (a whole 8-byte word, at a multiple of 8, outside the write)", ErrRange, word, len(src), off, h.Size)
	}
	p := thisProcess()
	be, err := p.bind(h)
	if err != nil {
		return err
	}
	if t, ok := be.(*tcpBackend); ok {
		err = t.onConn(ctx, h, func(c net.Conn) error { return exchangeWriteAdd(c, h, off, src, word, delta) })
	} else if s, ok := be.(*shmBackend); ok {
		err = s.writeAdd(h, off, src, word, delta)
	} else if err = be.write(ctx, h, off, src); err == nil {
		_, err = be.atomic(ctx, h, word, opFetchAdd, delta, 0)
	}
	if isClosed(err) {
		p.unbind(h)
	}
	return err
}

// writeAddOp is the tcp request of WriteAdd:
//
//	'W' key(8) off(8) len(8) word(8) delta(8) [len bytes]
//
// answered by status(1) alone: the owner writes the bytes at off, then
// adds delta to the word at word, only if both fit its buffer (the word
// aligned, outside the span); else it takes the bytes, applies neither
// and answers statusRange.
const writeAddOp = 'W'

// serveWriteAdd serves a writeAddOp request whose header said key, off
// and n.
func (p *process) serveWriteAdd(c net.Conn, r *bufio.Reader, key, off, n uint64) error {
	var args [16]byte
	if _, err := io.ReadFull(r, args[:]); err != nil {
		return err
	}
	word, delta := binary.LittleEndian.Uint64(args[:8]), binary.LittleEndian.Uint64(args[8:])
	if int64(n) < 0 {
		return fmt.Errorf("a write of %d bytes", n) // more than any stream holds: hang up
	}
	b, status, release := p.lockSpan(key, off, n)
	defer func() { release() }()
	if status == statusOK && (word%8 != 0 || uint64(len(b.mem)) < 8 || word > uint64(len(b.mem))-8 || word+8 > off && word < off+n) {
		status = statusRange
		release() // refused, as lockSpan's refusals are: the body drains unlocked
		release = func() {}
	}
	if status != statusOK {
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return err
		}
		_, err := c.Write([]byte{status})
		return err
	}
	if _, err := io.ReadFull(r, b.mem[off:off+n]); err != nil {
		return err
	}
	if _, err := atomicAt(b.mem, int(word), opFetchAdd, delta, 0); err != nil {
		status = statusRange
	}
	_, err := c.Write([]byte{status})
	return err
}

// writeAddRequest is a writeAddOp request's bytes.
func writeAddRequest(h Handle, off int, src []byte, word int, delta uint64) net.Buffers {
	hdr := make([]byte, headerLen+16)
	hdr[0] = writeAddOp
	binary.LittleEndian.PutUint64(hdr[1:9], h.Key)
	binary.LittleEndian.PutUint64(hdr[9:17], uint64(off))
	binary.LittleEndian.PutUint64(hdr[17:25], uint64(len(src)))
	binary.LittleEndian.PutUint64(hdr[25:33], uint64(word))
	binary.LittleEndian.PutUint64(hdr[33:41], delta)
	return net.Buffers{hdr, src}
}

// exchangeWriteAdd sends one writeAddOp request and reads its answer.
func exchangeWriteAdd(c net.Conn, h Handle, off int, src []byte, word int, delta uint64) error {
	bufs := writeAddRequest(h, off, src, word, delta)
	if _, err := bufs.WriteTo(c); err != nil {
		return fmt.Errorf("ibverbs: send to %s: %w", h.Addr, hungUp(err, 0))
	}
	var st [1]byte
	if n, err := io.ReadFull(c, st[:]); err != nil {
		return fmt.Errorf("ibverbs: answer from %s: %w", h.Addr, hungUp(err, n))
	}
	return statusErr(st[0])
}

// A Stream sends WriteAdds to one buffer in order, each without waiting
// for the answer to the one before: through tcp, on a connection of its
// own, where the owner applies them in the order sent, so that a word a
// stream adds to counts writes that are all in place. Answers are read
// in the background; a failed one fails the stream's next call. At most
// maxStreamAhead requests go unanswered: past it WriteAdd waits. Through
// the other backends, each WriteAdd is Handle.WriteAdd. A stream is for
// one goroutine at a time; Close it when done.
type Stream struct {
	h    Handle
	tcp  bool
	conn net.Conn
	used time.Time     // when the last request was answered: a connection idle for clientIdleBound is dialled anew
	owed chan struct{} // a token per request sent, not yet answered
	read chan struct{} // closed when the reader of answers ends
	sent int64         // requests sent on conn
	// answered counts the answers read on conn; answer has a token
	// after each.
	answered atomic.Int64
	answer   chan struct{}
	mu       sync.Mutex
	err      error // the first failure: the stream is broken
}

// maxStreamAhead bounds the requests of a stream that are not yet
// answered.
const maxStreamAhead = 64

// NewStream opens a stream to h's buffer.
func (h Handle) NewStream() (*Stream, error) {
	be, err := thisProcess().bind(h)
	if err != nil {
		return nil, err
	}
	_, tcp := be.(*tcpBackend)
	return &Stream{h: h, tcp: tcp}, nil
}

// WriteAdd is Handle.WriteAdd on the stream: src may be reused once it
// returns, but the write may not be applied yet (Flush). ctx bounds the
// sending.
func (s *Stream) WriteAdd(ctx context.Context, src []byte, off, word int, delta uint64) error {
	if !s.tcp {
		return s.h.WriteAdd(ctx, src, off, word, delta)
	}
	if err := s.failed(); err != nil {
		return err
	}
	h := s.h
	if !fits(h.Size, off, len(src)) || word%8 != 0 || !fits(h.Size, word, 8) || word+8 > off && word < off+len(src) {
		return fmt.Errorf("%w: a write of %d bytes at offset %d and an add at %d, of a buffer of %d bytes", ErrRange, len(src), off, word, h.Size)
	}
	if s.conn != nil && s.answered.Load() == s.sent && time.Since(s.used) >= clientIdleBound {
		s.Close() // its server may be closing it: dial anew
		s.conn = nil
	}
	if s.conn == nil {
		c, err := dialOwner(ctx, h.Addr, h.TLS)
		if err != nil {
			return s.fail(fmt.Errorf("ibverbs: reach the buffer's owner at %s: %w", h.Addr, err))
		}
		s.conn, s.owed, s.read, s.answer = c, make(chan struct{}, maxStreamAhead), make(chan struct{}), make(chan struct{}, 1)
		s.sent = 0
		s.answered.Store(0)
		s.used = time.Now()
		go s.readAnswers(c, s.owed, s.read)
	}
	deadline := time.Now().Add(transferBound)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	s.conn.SetDeadline(deadline) // before the reader waits for the answer
	select {
	case s.owed <- struct{}{}:
		s.sent++
	case <-ctx.Done():
		return s.fail(context.Cause(ctx))
	}
	stop := context.AfterFunc(ctx, func() { s.conn.SetDeadline(time.Now()) })
	defer stop()
	bufs := writeAddRequest(h, off, src, word, delta)
	if _, err := bufs.WriteTo(s.conn); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return s.fail(fmt.Errorf("ibverbs: send to %s: %w", h.Addr, err))
	}
	return nil
}

// readAnswers reads an answer for each token of owed, until owed is
// closed or an answer fails, then closes read.
func (s *Stream) readAnswers(c net.Conn, owed chan struct{}, read chan struct{}) {
	defer close(read)
	var st [1]byte
	for range owed {
		var err error
		if _, rerr := io.ReadFull(c, st[:]); rerr != nil {
			err = fmt.Errorf("ibverbs: answer from %s: %w", s.h.Addr, rerr)
		} else {
			err = statusErr(st[0])
		}
		if err != nil {
			s.fail(err)
			c.Close() // and the sender's write, if it waits, fails
		} else {
			s.answered.Add(1)
		}
		select { // Flush looks again
		case s.answer <- struct{}{}:
		default:
		}
		if err != nil {
			break
		}
	}
	for range owed { // so that WriteAdd does not wait for room
	}
}

// Flush waits, bounded by ctx and transferBound, until every request sent
// is answered, and returns the stream's first failure.
func (s *Stream) Flush(ctx context.Context) error {
	if !s.tcp || s.conn == nil {
		return s.failed()
	}
	bound := time.NewTimer(transferBound)
	defer bound.Stop()
	for s.answered.Load() < s.sent {
		if err := s.failed(); err != nil {
			return err
		}
		select {
		case <-s.answer:
		case <-s.read:
			return s.fail(fmt.Errorf("ibverbs: the stream to %s ended", s.h.Addr))
		case <-ctx.Done():
			return s.fail(context.Cause(ctx))
		case <-bound.C:
			return s.fail(fmt.Errorf("ibverbs: no answer from %s for %v", s.h.Addr, transferBound))
		}
	}
	s.used = time.Now()
	return s.failed()
}

// Close ends the stream's connection; requests not yet answered may or
// may not be applied. A stream closed, or broken, can be used again: it
// dials anew.
func (s *Stream) Close() error {
	if s.conn == nil {
		return nil
	}
	s.conn.Close()
	close(s.owed)
	<-s.read
	s.conn = nil
	s.mu.Lock()
	s.err = nil
	s.mu.Unlock()
	return nil
}

// fail records err as the stream's failure if it has none, and returns
// the failure.
func (s *Stream) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	return s.err
}

func (s *Stream) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
