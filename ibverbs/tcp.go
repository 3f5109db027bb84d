package ibverbs

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
)

// Transfers between machines, the tcp backend: each process that owns
// buffers serves them on one TCP port, on the address it reaches the
// job's bus from (what the other hosts can dial). A request is
//
//	op(1) key(8) off(8) len(8) [len bytes for 'w'; a(8) b(8) for 'a', 'c']
//
// with op 'r' (read), 'w' (write), 'a' (fetch-and-add a) or 'c'
// (compare a, swap b), answered by status(1: 0 ok, 1 no such buffer, 2
// out of range) and, for a read, len bytes, for an atomic the word as it
// was (8). Connections are kept and reused. A large read or write is cut
// in parts that go on parallel connections (EnvTCPStreams): one stream is
// bound by one core's copying, and by one connection's window.

// tcpServer is the owner side: one listener per process, started with
// the process's first buffer. It is part of process, under its mu.
type tcpServer struct {
	ln   net.Listener
	addr string
	pin  string // its certificate's SHA-256 when it serves TLS
}

// serveTCP starts this process's server once and returns its address, and
// its certificate's SHA-256 when it serves TLS (the job's bus does).
func (p *process) serveTCP() (addr, pin string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tcp.ln == nil {
		ln, err := net.Listen("tcp", net.JoinHostPort(listenHost(), "0"))
		if err != nil {
			return "", "", fmt.Errorf("ibverbs: serve buffers: %w", err)
		}
		srv := tcpServer{ln: ln, addr: ln.Addr().String()}
		if jobenv.BusTLS() {
			cert, pin, err := selfSigned()
			if err != nil {
				ln.Close()
				return "", "", fmt.Errorf("ibverbs: a certificate for the buffer server: %w", err)
			}
			srv.ln, srv.pin = tls.NewListener(ln, serverTLS(cert)), pin
		}
		p.tcp = srv
		go p.acceptLoop(srv.ln)
	}
	return p.tcp.addr, p.tcp.pin, nil
}

// listenHost is this host's address on the route to the job's bus, or
// loopback without one.
func listenHost() string {
	u, err := url.Parse(jobenv.BusURL())
	if err != nil || u.Hostname() == "" {
		return "127.0.0.1"
	}
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP(u.Hostname()), Port: 9})
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

func (p *process) acceptLoop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.serveConn(c)
	}
}

const (
	statusOK      = 0
	statusNoSuch  = 1
	statusRange   = 2
	headerLen     = 25
	maxIdleConns  = 16
	transferBound = 10 * time.Minute // no transfer waits longer, whatever ctx says
)

// EnvTCPStreams sets how many parallel connections the tcp backend cuts
// a large transfer into (1..64; default DefaultTCPStreams). Each part is
// at least minStreamPart bytes.
const EnvTCPStreams = "MONARCH_RDMA_TCP_STREAMS"

// DefaultTCPStreams is EnvTCPStreams' default.
const DefaultTCPStreams = 4

const minStreamPart = 4 << 20

// tcpStreams is EnvTCPStreams, read at each transfer; a bad value is the
// default.
func tcpStreams() int {
	n, err := strconv.Atoi(os.Getenv(EnvTCPStreams))
	if err != nil || n < 1 || n > 64 {
		return DefaultTCPStreams
	}
	return n
}

func (p *process) serveConn(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 256<<10)
	var hdr [headerLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		op, key := hdr[0], binary.LittleEndian.Uint64(hdr[1:9])
		off, n := binary.LittleEndian.Uint64(hdr[9:17]), binary.LittleEndian.Uint64(hdr[17:25])
		var err error
		switch op {
		case 'r', 'w':
			err = p.serveCopy(c, r, key, op, off, n)
		case byte(opFetchAdd), byte(opCAS):
			err = p.serveAtomic(c, r, key, atomicOp(op), off, n)
		case 'q':
			err = p.serveHandshake(c, r, key, n)
		default:
			return // not this protocol: nothing after it can be trusted
		}
		if err != nil {
			return
		}
	}
}

// serveCopy serves a read or a write of n bytes at off.
func (p *process) serveCopy(c net.Conn, r *bufio.Reader, key uint64, op byte, off, n uint64) error {
	b := p.lookup(key)
	if b != nil {
		b.mu.RLock() // held while this request touches its memory
		defer b.mu.RUnlock()
	}
	status := byte(statusOK)
	switch {
	case b == nil || b.mem == nil:
		status = statusNoSuch
	case off > uint64(len(b.mem)) || n > uint64(len(b.mem))-off:
		status = statusRange
	}
	var span []byte
	if status == statusOK {
		span = b.mem[off : off+n]
	}
	return answer(c, r, span, op, n, status)
}

// serveAtomic serves an atomic on the word at off; n must be 16, the
// operands' length.
func (p *process) serveAtomic(c net.Conn, r *bufio.Reader, key uint64, op atomicOp, off, n uint64) error {
	if n != 16 {
		return fmt.Errorf("an atomic with %d bytes of operands", n)
	}
	var args [16]byte
	if _, err := io.ReadFull(r, args[:]); err != nil {
		return err
	}
	var out [9]byte
	b := p.lookup(key)
	switch {
	case b == nil:
		out[0] = statusNoSuch
	case off > uint64(b.handle.Size):
		out[0] = statusRange
	default:
		v, err := b.atomicAt(int(off), op, binary.LittleEndian.Uint64(args[:8]), binary.LittleEndian.Uint64(args[8:]))
		switch {
		case isClosed(err):
			out[0] = statusNoSuch
		case err != nil:
			out[0] = statusRange
		}
		binary.LittleEndian.PutUint64(out[1:], v)
	}
	_, err := c.Write(out[:])
	return err
}

// maxHandshake bounds a handshake request's payload.
const maxHandshake = 256

// serveHandshake answers a peer's queue pair data (verbs) with this
// process's: for a peer that holds the key of a buffer here.
func (p *process) serveHandshake(c net.Conn, r *bufio.Reader, key, n uint64) error {
	if n > maxHandshake {
		return fmt.Errorf("a handshake of %d bytes", n)
	}
	req := make([]byte, n)
	if _, err := io.ReadFull(r, req); err != nil {
		return err
	}
	var out []byte
	status := byte(statusOK)
	switch {
	case p.lookup(key) == nil:
		status = statusNoSuch
	case p.qpHandshake == nil:
		status = statusRange // no RDMA here: nothing to connect
	default:
		var err error
		if out, err = p.qpHandshake(req); err != nil {
			status = statusRange
		}
	}
	var hdr [3]byte
	hdr[0] = status
	binary.LittleEndian.PutUint16(hdr[1:], uint16(len(out)))
	bufs := net.Buffers{hdr[:], out}
	_, err := bufs.WriteTo(c)
	return err
}

// answer serves one request on span, the n bytes of the buffer it names
// (nil unless status is statusOK).
func answer(c net.Conn, r *bufio.Reader, span []byte, op byte, n uint64, status byte) error {
	if op == 'w' {
		// The data follows the request whatever the status: take it.
		if status == statusOK {
			if _, err := io.ReadFull(r, span); err != nil {
				return err
			}
		} else if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return err
		}
		_, err := c.Write([]byte{status})
		return err
	}
	if _, err := c.Write([]byte{status}); err != nil {
		return err
	}
	if status == statusOK {
		_, err := c.Write(span)
		return err
	}
	return nil
}

func init() {
	register("tcp", func(*process) backend {
		return &tcpBackend{idle: map[string][]net.Conn{}}
	})
}

// tcpBackend is the client side: it reaches any buffer whose owner's
// server it can dial, keeping idle connections to owners for reuse.
type tcpBackend struct {
	mu   sync.Mutex
	idle map[string][]net.Conn // by owner address and pin (connKey), at most maxIdleConns each
}

func (*tcpBackend) name() string { return "tcp" }

func (*tcpBackend) usable(h Handle) error {
	if h.Addr == "" {
		return errors.New("the handle has no TCP address")
	}
	return nil
}

func (t *tcpBackend) read(ctx context.Context, h Handle, off int, dst []byte) error {
	return t.transfer(ctx, h, off, dst, false)
}

func (t *tcpBackend) write(ctx context.Context, h Handle, off int, src []byte) error {
	return t.transfer(ctx, h, off, src, true)
}

// connKey is what an idle connection is kept under: a connection made
// for one certificate pin (or none) serves no handle with another.
func connKey(addr, pin string) string { return addr + " " + pin }

func (t *tcpBackend) getConn(ctx context.Context, addr, pin string) (net.Conn, error) {
	k := connKey(addr, pin)
	t.mu.Lock()
	if cs := t.idle[k]; len(cs) > 0 {
		c := cs[len(cs)-1]
		t.idle[k] = cs[:len(cs)-1]
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	return dialOwner(ctx, addr, pin)
}

// dialOwner connects to an owner's server at addr: with TLS, accepting
// only the certificate pin names, when pin is set.
func dialOwner(ctx context.Context, addr, pin string) (net.Conn, error) {
	var d net.Dialer
	if pin == "" {
		return d.DialContext(ctx, "tcp", addr)
	}
	td := tls.Dialer{NetDialer: &d, Config: clientTLS(pin)}
	return td.DialContext(ctx, "tcp", addr)
}

func (t *tcpBackend) putConn(k string, c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle[k]) < maxIdleConns {
		c.SetDeadline(time.Time{})
		t.idle[k] = append(t.idle[k], c)
		return
	}
	c.Close()
}

// transfer is bounded by ctx and by transferBound. A large one is cut in
// parts on parallel connections.
func (t *tcpBackend) transfer(ctx context.Context, h Handle, off int, b []byte, write bool) error {
	parts := min(tcpStreams(), len(b)/minStreamPart)
	if parts <= 1 {
		return t.onConn(ctx, h, func(c net.Conn) error { return exchange(c, h, off, b, write) })
	}
	size := (len(b) + parts - 1) / parts
	errs := make(chan error, parts)
	for lo := 0; lo < len(b); lo += size {
		part := b[lo:min(lo+size, len(b))]
		go func() {
			errs <- t.onConn(ctx, h, func(c net.Conn) error { return exchange(c, h, off+lo, part, write) })
		}()
	}
	var first error
	for lo := 0; lo < len(b); lo += size {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (t *tcpBackend) atomic(ctx context.Context, h Handle, off int, op atomicOp, a, b uint64) (uint64, error) {
	var v uint64
	err := t.onConn(ctx, h, func(c net.Conn) (err error) {
		v, err = exchangeAtomic(c, h, off, op, a, b)
		return err
	})
	return v, err
}

// onConn runs fn on a connection to h's owner, bounded by ctx and by
// transferBound; the connection is kept for reuse if fn succeeds.
func (t *tcpBackend) onConn(ctx context.Context, h Handle, fn func(net.Conn) error) error {
	c, err := t.getConn(ctx, h.Addr, h.TLS)
	if err != nil {
		return fmt.Errorf("ibverbs: reach the buffer's owner at %s: %w", h.Addr, err)
	}
	deadline := time.Now().Add(transferBound)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if err := fn(c); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	t.putConn(connKey(h.Addr, h.TLS), c)
	return nil
}

// exchangeAtomic sends one atomic and reads the word as it was.
func exchangeAtomic(c net.Conn, h Handle, off int, op atomicOp, a, b uint64) (uint64, error) {
	var req [headerLen + 16]byte
	req[0] = byte(op)
	binary.LittleEndian.PutUint64(req[1:9], h.Key)
	binary.LittleEndian.PutUint64(req[9:17], uint64(off))
	binary.LittleEndian.PutUint64(req[17:25], 16)
	binary.LittleEndian.PutUint64(req[25:33], a)
	binary.LittleEndian.PutUint64(req[33:41], b)
	if _, err := c.Write(req[:]); err != nil {
		return 0, fmt.Errorf("ibverbs: send to %s: %w", h.Addr, err)
	}
	var out [9]byte
	if _, err := io.ReadFull(c, out[:]); err != nil {
		return 0, fmt.Errorf("ibverbs: answer from %s: %w", h.Addr, err)
	}
	return binary.LittleEndian.Uint64(out[1:]), statusErr(out[0])
}

// statusErr is the error of an answer's status.
func statusErr(st byte) error {
	switch st {
	case statusOK:
		return nil
	case statusNoSuch:
		return ErrClosed
	case statusRange:
		return ErrRange
	}
	return errors.New("ibverbs: bad answer from the buffer's owner")
}

func exchange(c net.Conn, h Handle, off int, b []byte, write bool) error {
	var hdr [headerLen]byte
	hdr[0] = 'r'
	if write {
		hdr[0] = 'w'
	}
	binary.LittleEndian.PutUint64(hdr[1:9], h.Key)
	binary.LittleEndian.PutUint64(hdr[9:17], uint64(off))
	binary.LittleEndian.PutUint64(hdr[17:25], uint64(len(b)))
	bufs := net.Buffers{hdr[:]}
	if write {
		bufs = append(bufs, b)
	}
	if _, err := bufs.WriteTo(c); err != nil {
		return fmt.Errorf("ibverbs: send to %s: %w", h.Addr, err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		return fmt.Errorf("ibverbs: answer from %s: %w", h.Addr, err)
	}
	if err := statusErr(st[0]); err != nil {
		return err
	}
	if !write {
		if _, err := io.ReadFull(c, b); err != nil {
			return fmt.Errorf("ibverbs: read from %s: %w", h.Addr, err)
		}
	}
	return nil
}
