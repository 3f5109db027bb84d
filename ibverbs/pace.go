package ibverbs

import (
	"net"
	"sync"
	"time"
)

// pacedConn holds the peer of a connection to progress: each
// progressChunk read from it, and each written to it, must move within
// bound, and all of it before end (when set), or the read or write fails
// with a timeout. Bounding progress, not the total, lets a gigabyte
// through a slow link while a peer that stops is cut off within bound.
// The buffer server holds its peers to it (servedConn), and a client the
// owner it reads from or writes to (tcpBackend.request).
//
// One goroutine reads and writes; stop may be called from another.
type pacedConn struct {
	net.Conn
	bound time.Duration
	end   time.Time // zero: none

	mu       sync.Mutex // between pace and stop
	stopped  bool
	readLeft int // bytes still to read under the current read deadline
}

// pace sets the deadline of the next progressChunk read (read) or
// written: bound from now, or end if sooner; nothing once stopped, so
// that what is blocked or comes next fails.
func (c *pacedConn) pace(read bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	d := time.Now().Add(c.bound)
	if !c.end.IsZero() && c.end.Before(d) {
		d = c.end
	}
	if read {
		c.Conn.SetReadDeadline(d)
	} else {
		c.Conn.SetWriteDeadline(d)
	}
}

// stop makes what is blocked on the connection, and what comes next,
// fail at once: the request's context ended.
func (c *pacedConn) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.Conn.SetDeadline(time.Now())
}

func (c *pacedConn) Read(b []byte) (int, error) {
	if c.readLeft <= 0 {
		c.pace(true)
		c.readLeft = progressChunk
	}
	n, err := c.Conn.Read(b)
	c.readLeft -= n
	return n, err
}

func (c *pacedConn) Write(b []byte) (int, error) {
	n, err := c.writeBuffers(net.Buffers{b})
	return int(n), err
}

// writeBuffers writes bufs whole, a progressChunk at a time, each under a
// deadline of its own; the pieces of a chunk go in one writev where the
// connection is a plain TCP one.
func (c *pacedConn) writeBuffers(bufs net.Buffers) (int64, error) {
	var done int64
	for len(bufs) > 0 {
		var chunk net.Buffers
		for n := 0; len(bufs) > 0 && n < progressChunk; {
			b := bufs[0]
			take := min(len(b), progressChunk-n)
			chunk = append(chunk, b[:take])
			n += take
			if take == len(b) {
				bufs = bufs[1:]
			} else {
				bufs[0] = b[take:]
			}
		}
		c.pace(false)
		n, err := chunk.WriteTo(c.Conn)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// send writes bufs to c, in one writev where c allows it, paced if c is.
func send(c net.Conn, bufs net.Buffers) error {
	if pc, ok := c.(*pacedConn); ok {
		_, err := pc.writeBuffers(bufs)
		return err
	}
	_, err := bufs.WriteTo(c)
	return err
}
