package ibverbs

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The door of the buffer server. A peer proves itself with its first
// request: it names a buffer this process owns by its key, a handle's
// secret, and arrives whole within authBound of its first byte (its TLS
// handshake included). Until then nothing is spent on it but a socket:
//
//   - a new connection is held, its socket in the door's epoll set:
//     no goroutine, no buffer, a few hundred bytes. A client sends its
//     request (or its TLS hello) as soon as it connects, so its socket
//     turns readable at once; a flood's, which sends nothing, never does,
//     and is closed after holdBound to twice that, at random;
//   - a readable one gets a goroutine that reads its request's header
//     (TLS handshake first), with a reader of no more than the header:
//     it is reading, for authBound at most;
//   - the held are bounded overall (limits.held, from the process's
//     descriptors): past the bound the oldest of the source with the most
//     gives way. The reading are bounded overall and per source address
//     (limits.pending, limits.perSource): past a bound, the oldest of its
//     source (or of the busiest) gives way.
//
// Closing what a flood holds only makes it open more, at the cost of
// both ends' processors, which the job's transfers need: the door holds
// a flood's connections, cheaply, rather than cut them, and a client's
// connection, readable on arrival, goes past them at once. It lets the
// silent go at random times, not all at once, so that a flood that opens
// again does so a little at a time. What is displaced is closed (the
// first time, said on stderr); a client whose connection was dials again
// (tcpBackend.onConn).

const (
	// authBound (5 s) is how long a new connection has to prove itself:
	// a TLS handshake and a request's header, which a client sends at
	// once, take milliseconds; a connection that sends nothing, or half,
	// is closed at the bound.
	authBound = 5 * time.Second
	// holdBound (30 s) is the least time a connection that sends nothing
	// is held; each is let go at a random time between it and twice it.
	// It costs a socket, bounded by heldBound, and letting it go sooner
	// would only make a flood open another sooner.
	holdBound = 30 * time.Second
	// maxPending (1024) bounds the connections reading their first
	// request, all sources together: at most a few MiB of goroutines and
	// TLS state.
	maxPending = 1024
	// maxPendingPerSource (128) bounds them per source address: more than
	// a host's procs dial at once (a batch of 16 transfers on 4 streams
	// each, from a few procs of the host).
	maxPendingPerSource = 128
	// maxHeld (65536) bounds the connections held, whatever the
	// descriptors allow (heldBound).
	maxHeld = 1 << 16
)

// heldBound is how many connections the door holds: the descriptors
// this process may open, less those its served and reading connections
// may take and 1024 for the rest of the process, at least 1024 and at
// most maxHeld.
func heldBound() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	spare := int64(rl.Cur) - maxServedConns - maxPending - 1024
	return int(min(max(spare, 1024), maxHeld))
}

// door holds the server's connections that have not proved themselves:
// held, and reading.
type door struct {
	limits serverLimits
	read   func(w *waiting) // gives a readable connection its goroutine
	epfd   int              // the held's sockets; -1 where none can be made

	mu      sync.Mutex
	next    uint64              // the id of the next connection
	byID    map[uint64]*waiting // the held, by id (epoll's data)
	held    queues
	reading queues
	closed  bool

	// displaced counts connections closed for newer ones.
	displaced atomic.Uint64
	server    string // the server's address, for what the door says
}

// waiting is a connection at the door.
type waiting struct {
	net.Conn
	id     uint64
	fd     int // its socket, -1 if it has none (not TCP)
	source string
	since  time.Time // when it came, or turned readable
	until  time.Time // when it is let go, held
	state  int       // held, reading, or out (through, displaced, expired)
}

const (
	held = iota
	reading
	out
)

// queues are the connections of the door in one state (held, or
// reading), by source, oldest first, and how many in all. A connection
// taken out stays in its source's list until it reaches the front or
// the dead are half the list, so that taking one out is not a walk of a
// long list (a flood's source may have 65,536).
type queues struct {
	state    int
	bySource map[string]*queue
	n        int
}

// queue is a source's connections; those not in the state any more are
// dead.
type queue struct {
	ws   []*waiting
	live int
}

func (q *queues) push(w *waiting) {
	if q.bySource == nil {
		q.bySource = map[string]*queue{}
	}
	sq := q.bySource[w.source]
	if sq == nil {
		sq = &queue{}
		q.bySource[w.source] = sq
	}
	sq.ws = append(sq.ws, w)
	sq.live++
	q.n++
}

// remove counts w, which leaves the state, out of q.
func (q *queues) remove(w *waiting) {
	sq := q.bySource[w.source]
	sq.live--
	q.n--
	switch {
	case sq.live == 0:
		delete(q.bySource, w.source)
	case len(sq.ws) > 32 && sq.live < len(sq.ws)/2:
		q.compact(sq, w)
	}
}

// compact drops the dead of sq, and leaving, which is leaving the state.
func (q *queues) compact(sq *queue, leaving *waiting) {
	kept := sq.ws[:0]
	for _, w := range sq.ws {
		if w != leaving && w.state == q.state {
			kept = append(kept, w)
		}
	}
	clear(sq.ws[len(kept):])
	sq.ws = kept
}

// oldest is the oldest connection of source, or of the source with the
// most if source is "", or nil.
func (q *queues) oldest(source string) *waiting {
	if source == "" {
		most := 0
		for s, sq := range q.bySource {
			if sq.live > most {
				source, most = s, sq.live
			}
		}
	}
	sq := q.bySource[source]
	if sq == nil {
		return nil
	}
	for len(sq.ws) > 0 && sq.ws[0].state != q.state {
		sq.ws[0] = nil
		sq.ws = sq.ws[1:]
	}
	if len(sq.ws) == 0 {
		return nil
	}
	return sq.ws[0]
}

// count is how many connections of source are in q.
func (q *queues) count(source string) int {
	if sq := q.bySource[source]; sq != nil {
		return sq.live
	}
	return 0
}

// newDoor is the door of the server at addr, under limits; read serves a
// connection that turned readable.
func newDoor(server string, limits serverLimits, read func(w *waiting)) *door {
	d := &door{limits: limits, read: read, server: server, byID: map[uint64]*waiting{}, epfd: -1,
		held: queues{state: held}, reading: queues{state: reading}}
	if fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC); err == nil {
		d.epfd = fd
		go d.watch()
	}
	return d
}

// sourceOf is the address a connection comes from, without its port.
func sourceOf(c net.Conn) string {
	a := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

// socketOf is c's socket, or -1: a TCP connection's, under TLS or not.
func socketOf(c net.Conn) int {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(s uintptr) { fd = int(s) })
	return fd
}

// enter takes a connection the server accepted: held, or, where it
// cannot be, reading at once.
func (d *door) enter(c net.Conn) {
	now := time.Now()
	w := &waiting{Conn: c, fd: socketOf(c), source: sourceOf(c), since: now,
		until: now.Add(d.limits.hold + rand.N(d.limits.hold))}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		c.Close()
		return
	}
	d.next++
	w.id = d.next
	var gone []*waiting
	if d.epfd >= 0 && w.fd >= 0 {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(w.id), Pad: int32(w.id >> 32)}
		if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, w.fd, &ev); err == nil {
			w.state = held
			d.byID[w.id] = w
			d.held.push(w)
			if d.held.n > d.limits.held {
				gone = append(gone, d.displace(d.held.oldest("")))
			}
			d.mu.Unlock()
			d.closeAll(gone)
			return
		}
	}
	gone = d.startReading(w)
	d.mu.Unlock()
	d.closeAll(gone)
	go d.read(w)
}

// startReading counts w among the reading, displacing the oldest of its
// source, or of the busiest, past a bound. Hold mu.
func (d *door) startReading(w *waiting) (gone []*waiting) {
	switch {
	case d.reading.count(w.source) >= d.limits.perSource:
		gone = append(gone, d.displace(d.reading.oldest(w.source)))
	case d.reading.n >= d.limits.pending:
		gone = append(gone, d.displace(d.reading.oldest("")))
	}
	w.state = reading
	d.reading.push(w)
	return gone
}

// displace takes w out of the door, for the caller to close outside mu.
// Hold mu.
func (d *door) displace(w *waiting) *waiting {
	d.drop(w)
	if d.displaced.Add(1) == 1 {
		fmt.Fprintf(os.Stderr, "ibverbs: the buffer server at %s holds as many connections that did not prove themselves as it keeps (%d held, %d reading, %d reading from one address): it closes the oldest for new ones (first from %s)\n",
			d.server, d.limits.held, d.limits.pending, d.limits.perSource, w.source)
	}
	return w
}

// drop takes w out of the door's lists (and epoll set). Hold mu.
func (d *door) drop(w *waiting) {
	switch w.state {
	case held:
		unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
		delete(d.byID, w.id)
		d.held.remove(w)
	case reading:
		d.reading.remove(w)
	}
	w.state = out
}

func (d *door) closeAll(ws []*waiting) {
	for _, w := range ws {
		w.Close()
	}
}

// watch hands each held connection that turns readable its goroutine,
// closes those whose peer hung up, and those held past their time (a
// look each 100 ms: a few at a time), until the door closes.
func (d *door) watch() {
	events := make([]unix.EpollEvent, 128)
	var lastExpiry time.Time
	for {
		n, err := unix.EpollWait(d.epfd, events, 100)
		if err != nil && err != unix.EINTR {
			n = 0
			time.Sleep(10 * time.Millisecond)
		}
		var ready, gone []*waiting
		d.mu.Lock()
		if d.closed {
			for _, w := range d.byID {
				d.drop(w)
				gone = append(gone, w)
			}
			d.mu.Unlock()
			d.closeAll(gone)
			unix.Close(d.epfd)
			return
		}
		for _, ev := range events[:max(n, 0)] {
			w := d.byID[uint64(ev.Fd)|uint64(ev.Pad)<<32]
			if w == nil {
				continue // displaced or expired since
			}
			d.drop(w)
			if ev.Events&unix.EPOLLIN == 0 {
				gone = append(gone, w) // hung up, saying nothing
				continue
			}
			w.since = time.Now()
			gone = append(gone, d.startReading(w)...)
			ready = append(ready, w)
		}
		if now := time.Now(); now.Sub(lastExpiry) >= 100*time.Millisecond {
			gone = append(gone, d.expire(now)...)
			lastExpiry = now
		}
		d.mu.Unlock()
		d.closeAll(gone)
		for _, w := range ready {
			go d.read(w)
		}
	}
}

// expire takes out the held whose time is past. Hold mu.
func (d *door) expire(now time.Time) (gone []*waiting) {
	for source, sq := range d.held.bySource {
		kept := sq.ws[:0]
		for _, w := range sq.ws {
			switch {
			case w.state != held:
			case now.Before(w.until):
				kept = append(kept, w)
			default:
				unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
				delete(d.byID, w.id)
				w.state = out
				gone = append(gone, w)
			}
		}
		clear(sq.ws[len(kept):])
		sq.ws, sq.live = kept, len(kept)
		if len(kept) == 0 {
			delete(d.held.bySource, source)
		}
	}
	d.held.n -= len(gone)
	return gone
}

// through takes w, which proved itself, out of the door: false if it was
// displaced meanwhile (and closed).
func (d *door) through(w *waiting) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.state == out {
		return false
	}
	d.drop(w)
	return true
}

// leave takes w out of the door, if it still is in: it ended without
// proving itself.
func (d *door) leave(w *waiting) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.state != out {
		d.drop(w)
	}
}

// close closes the door: what waits at it is closed.
func (d *door) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
}

// waitingNow is how many connections are at the door: held, reading.
func (d *door) waitingNow() (held, reading int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held.n, d.reading.n
}
