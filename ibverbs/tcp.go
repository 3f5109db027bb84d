package ibverbs

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
)

// Transfers between machines, the tcp backend: each process that owns
// buffers serves them on one TCP port, on the address it reaches the
// job's bus from (what the other hosts can dial). A request is
//
//	op(1: 'r' or 'w') key(8) off(8) len(8) [len bytes for a write]
//
// answered by status(1: 0 ok, 1 no such buffer, 2 out of range) and, for
// a read, len bytes. Connections are kept and reused.

// tcpServer is the owner side: one listener per process, started with
// the process's first buffer. It is part of process, under its mu.
type tcpServer struct {
	ln   net.Listener
	addr string
}

// serveTCP starts this process's server once and returns its address.
func (p *process) serveTCP() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tcp.ln == nil {
		ln, err := net.Listen("tcp", net.JoinHostPort(listenHost(), "0"))
		if err != nil {
			return "", fmt.Errorf("ibverbs: serve buffers: %w", err)
		}
		p.tcp = tcpServer{ln: ln, addr: ln.Addr().String()}
		go p.acceptLoop(ln)
	}
	return p.tcp.addr, nil
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
	maxIdleConns  = 8
	transferBound = 10 * time.Minute // no transfer waits longer, whatever ctx says
)

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
		b := p.lookup(key)
		if b != nil {
			b.mu.RLock() // held while this request touches its memory
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
		err := answer(c, r, span, op, n, status)
		if b != nil {
			b.mu.RUnlock()
		}
		if err != nil {
			return
		}
	}
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
	idle map[string][]net.Conn // by owner address, at most maxIdleConns each
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

func (t *tcpBackend) getConn(ctx context.Context, addr string) (net.Conn, error) {
	t.mu.Lock()
	if cs := t.idle[addr]; len(cs) > 0 {
		c := cs[len(cs)-1]
		t.idle[addr] = cs[:len(cs)-1]
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (t *tcpBackend) putConn(addr string, c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle[addr]) < maxIdleConns {
		c.SetDeadline(time.Time{})
		t.idle[addr] = append(t.idle[addr], c)
		return
	}
	c.Close()
}

// transfer is bounded by ctx and by transferBound.
func (t *tcpBackend) transfer(ctx context.Context, h Handle, off int, b []byte, write bool) error {
	c, err := t.getConn(ctx, h.Addr)
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
	err = exchange(c, h, off, b, write)
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	t.putConn(h.Addr, c)
	return nil
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
	switch st[0] {
	case statusNoSuch:
		return ErrClosed
	case statusRange:
		return ErrRange
	case statusOK:
	default:
		return errors.New("ibverbs: bad answer from the buffer's owner")
	}
	if !write {
		if _, err := io.ReadFull(c, b); err != nil {
			return fmt.Errorf("ibverbs: read from %s: %w", h.Addr, err)
		}
	}
	return nil
}
