package ibverbs

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
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
	if word < 0 || !wordFits(uint64(h.Size), uint64(off), uint64(len(src)), uint64(word)) {
		return fmt.Errorf("%w: an add at offset %d after a write of %d bytes at %d, of a buffer of %d bytes (a whole 8-byte word, at a multiple of 8, outside the write)", ErrRange, word, len(src), off, h.Size)
	}
	p := thisProcess()
	be, err := p.bind(h)
	if err != nil {
		return err
	}
	if t, ok := be.backend.(*tcpBackend); ok {
		err = t.onConn(ctx, h, func(c net.Conn) error { return exchangeWriteAdd(c, h, off, src, word, delta) })
	} else if s, ok := be.backend.(*shmBackend); ok {
		err = s.writeAdd(h, off, src, word, delta)
	} else if err = be.write(ctx, h, off, src); err == nil {
		_, err = be.atomic(ctx, h, word, opFetchAdd, delta, 0)
	}
	return p.settle(h, be, err)
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
	if status == statusOK && !wordFits(uint64(len(b.mem)), off, n, word) {
		release() // refused, as lockSpan's refusals are: the body drains unlocked
		status = statusRange
	}
	if status != statusOK {
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return err
		}
		_, err := c.Write([]byte{status})
		return err
	}
	defer release()
	if _, err := io.ReadFull(r, b.mem[off:off+n]); err != nil {
		return err
	}
	if _, err := atomicAt(b.mem, int(word), opFetchAdd, delta, 0); err != nil {
		status = statusRange
	}
	_, err := c.Write([]byte{status})
	return err
}

// wordFits reports whether an add at byte word of a buffer of size bytes
// is on a whole 8-byte word, at a multiple of 8, outside the span of n
// bytes at off that WriteAdd writes.
func wordFits(size, off, n, word uint64) bool {
	return word%8 == 0 && size >= 8 && word <= size-8 && !(word+8 > off && word < off+n)
}

// exchangeWriteAdd sends one writeAddOp request and reads its answer.
func exchangeWriteAdd(c net.Conn, h Handle, off int, src []byte, word int, delta uint64) error {
	hdr := make([]byte, headerLen+16)
	hdr[0] = writeAddOp
	binary.LittleEndian.PutUint64(hdr[1:9], h.Key)
	binary.LittleEndian.PutUint64(hdr[9:17], uint64(off))
	binary.LittleEndian.PutUint64(hdr[17:25], uint64(len(src)))
	binary.LittleEndian.PutUint64(hdr[25:33], uint64(word))
	binary.LittleEndian.PutUint64(hdr[33:41], delta)
	bufs := net.Buffers{hdr, src}
	if err := send(c, bufs); err != nil {
		return fmt.Errorf("ibverbs: send to %s: %w", h.Addr, hungUp(err, 0))
	}
	var st [1]byte
	if n, err := io.ReadFull(c, st[:]); err != nil {
		return fmt.Errorf("ibverbs: answer from %s: %w", h.Addr, hungUp(err, n))
	}
	return statusErr(st[0])
}
