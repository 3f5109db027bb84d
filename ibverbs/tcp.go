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
	"os"
	"sync"
	"time"

	"github.com/monarch-go/monarch/bus"
)

// Transfers between machines: each process that owns buffers serves them
// on one TCP port, on the address it reaches the job's bus from (what the
// other hosts can dial). A request is
//
//	op(1: 'r' or 'w') key(8) len(8) [len bytes for a write]
//
// answered by status(1: 0 ok, 1 no such buffer, 2 out of range) and, for
// a read, len bytes. Connections are kept and reused.

var server = struct {
	sync.Mutex
	ln      net.Listener
	addr    string
	buffers map[uint64]*Buffer
}{buffers: map[uint64]*Buffer{}}

// serve registers b and returns the server's address, starting it once.
func serve(b *Buffer) (string, error) {
	server.Lock()
	defer server.Unlock()
	if server.ln == nil {
		host := listenHost()
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", fmt.Errorf("ibverbs: serve buffers: %w", err)
		}
		server.ln, server.addr = ln, ln.Addr().String()
		go acceptLoop(ln)
	}
	server.buffers[b.handle.Key] = b
	return server.addr, nil
}

func unserve(b *Buffer) {
	server.Lock()
	delete(server.buffers, b.handle.Key)
	server.Unlock()
}

func lookup(key uint64) *Buffer {
	server.Lock()
	defer server.Unlock()
	return server.buffers[key]
}

// listenHost is this host's address on the route to the job's bus, or
// loopback without one.
func listenHost() string {
	u, err := url.Parse(os.Getenv(bus.EnvURL))
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

func acceptLoop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serveConn(c)
	}
}

const (
	statusOK      = 0
	statusNoSuch  = 1
	statusRange   = 2
	headerLen     = 17
	maxIdleConns  = 8
	transferBound = 10 * time.Minute // no transfer waits longer, whatever ctx says
)

func serveConn(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 256<<10)
	var hdr [headerLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		op, key, n := hdr[0], binary.LittleEndian.Uint64(hdr[1:9]), binary.LittleEndian.Uint64(hdr[9:17])
		b := lookup(key)
		if b != nil {
			b.mu.RLock() // held while this request touches its memory
		}
		status := byte(statusOK)
		switch {
		case b == nil || b.mem == nil:
			status = statusNoSuch
		case n > uint64(len(b.mem)):
			status = statusRange
		}
		err := answer(c, r, b, op, n, status)
		if b != nil {
			b.mu.RUnlock()
		}
		if err != nil {
			return
		}
	}
}

// answer serves one request.
func answer(c net.Conn, r *bufio.Reader, b *Buffer, op byte, n uint64, status byte) error {
	if op == 'w' {
		// The data follows the request whatever the status: take it.
		if status == statusOK {
			if _, err := io.ReadFull(r, b.mem[:n]); err != nil {
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
		_, err := c.Write(b.mem[:n])
		return err
	}
	return nil
}

// idle connections to owners, by address.
var pool = struct {
	sync.Mutex
	m map[string][]net.Conn
}{m: map[string][]net.Conn{}}

func getConn(ctx context.Context, addr string) (net.Conn, error) {
	pool.Lock()
	if cs := pool.m[addr]; len(cs) > 0 {
		c := cs[len(cs)-1]
		pool.m[addr] = cs[:len(cs)-1]
		pool.Unlock()
		return c, nil
	}
	pool.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func putConn(addr string, c net.Conn) {
	pool.Lock()
	defer pool.Unlock()
	if len(pool.m[addr]) < maxIdleConns {
		c.SetDeadline(time.Time{})
		pool.m[addr] = append(pool.m[addr], c)
		return
	}
	c.Close()
}

func tcpTransfer(ctx context.Context, h Handle, b []byte, write bool) error {
	if h.Addr == "" {
		return fmt.Errorf("%w: the handle has no TCP address", ErrBackend)
	}
	c, err := getConn(ctx, h.Addr)
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
	err = exchange(c, h, b, write)
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	putConn(h.Addr, c)
	return nil
}

func exchange(c net.Conn, h Handle, b []byte, write bool) error {
	var hdr [headerLen]byte
	hdr[0] = 'r'
	if write {
		hdr[0] = 'w'
	}
	binary.LittleEndian.PutUint64(hdr[1:9], h.Key)
	binary.LittleEndian.PutUint64(hdr[9:17], uint64(len(b)))
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
