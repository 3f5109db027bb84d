package ibverbs

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The door of the buffer server. A peer proves itself with its first
// request: it names a buffer this process owns by its key, a handle's
// secret, and arrives whole within authBound of the connection (its TLS
// handshake included). Until then the connection is pending: it costs a
// goroutine, a socket and a header's bytes, no read buffer, and the
// pending are bounded per source address and overall. A new connection
// past a bound takes the place of the oldest pending one of its source
// (past the overall bound, of the source with the most): a flood from
// one address holds at most its share, and a connection that proves
// itself at once, as a job's own do, gets in whatever a flood from its
// own address does, unless the flood opens maxPendingPerSource
// connections in the moment its request takes to arrive (and then the
// client dials again: tcpBackend.onConn).

const (
	// authBound (5 s) is how long a new connection has to prove itself:
	// a TLS handshake and a request's header, which a client sends at
	// once, take milliseconds; a connection that sends nothing, or half,
	// is closed at the bound.
	authBound = 5 * time.Second
	// maxPending (1024) bounds the connections that have not proved
	// themselves yet, all sources together: at most a few MiB of
	// goroutines, sockets and TLS state.
	maxPending = 1024
	// maxPendingPerSource (128) bounds them per source address: more
	// than a host's procs dial at once (a batch of 16 transfers on 4
	// streams each, from a few procs of the host).
	maxPendingPerSource = 128
)

// door holds the server's pending connections, oldest first per source.
type door struct {
	limit, perSource int

	mu       sync.Mutex
	bySource map[string][]*pendingConn
	n        int
	// displaced counts pending connections closed for a newer one.
	displaced atomic.Uint64
}

// pendingConn is a connection on its way through the door.
type pendingConn struct {
	net.Conn
	source string
	out    bool // no longer in the door's lists: displaced, or through
}

func newDoor(limit, perSource int) *door {
	return &door{limit: limit, perSource: perSource, bySource: map[string][]*pendingConn{}}
}

// sourceOf is the address a connection comes from, without its port.
func sourceOf(c net.Conn) string {
	a := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

// enter makes c pending. The pending connection it displaces, if any, is
// closed, and said once on stderr (server names the server).
func (d *door) enter(c net.Conn, server string) *pendingConn {
	pc := &pendingConn{Conn: c, source: sourceOf(c)}
	d.mu.Lock()
	var out *pendingConn
	switch {
	case len(d.bySource[pc.source]) >= d.perSource:
		out = d.takeOldest(pc.source)
	case d.n >= d.limit:
		out = d.takeOldest(d.busiest())
	}
	d.bySource[pc.source] = append(d.bySource[pc.source], pc)
	d.n++
	d.mu.Unlock()
	if out != nil {
		out.Close()
		if d.displaced.Add(1) == 1 {
			fmt.Fprintf(os.Stderr, "ibverbs: the buffer server at %s has %d connections that did not prove themselves yet (at most %d from one address): it closes the oldest for new ones (first from %s)\n",
				server, d.limit, d.perSource, out.source)
		}
	}
	return pc
}

// busiest is the source with the most pending connections. Hold mu.
func (d *door) busiest() string {
	var most string
	for s, cs := range d.bySource {
		if most == "" || len(cs) > len(d.bySource[most]) {
			most = s
		}
	}
	return most
}

// takeOldest takes the oldest pending connection of source out of the
// lists. Hold mu.
func (d *door) takeOldest(source string) *pendingConn {
	cs := d.bySource[source]
	if len(cs) == 0 {
		return nil
	}
	oldest := cs[0]
	d.remove(oldest) // shifts cs
	return oldest
}

// remove takes pc out of the lists. Hold mu.
func (d *door) remove(pc *pendingConn) {
	cs := d.bySource[pc.source]
	for i, c := range cs {
		if c == pc {
			cs = append(cs[:i], cs[i+1:]...)
			break
		}
	}
	if len(cs) == 0 {
		delete(d.bySource, pc.source)
	} else {
		d.bySource[pc.source] = cs
	}
	d.n--
	pc.out = true
}

// through takes pc, which proved itself, out of the pending: false if it
// was displaced meanwhile (and closed).
func (d *door) through(pc *pendingConn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if pc.out {
		return false
	}
	d.remove(pc)
	return true
}

// leave takes pc out of the pending, if it still is: it ended without
// proving itself.
func (d *door) leave(pc *pendingConn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !pc.out {
		d.remove(pc)
	}
}

// pending is how many connections wait at the door.
func (d *door) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}
