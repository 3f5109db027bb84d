package door

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are a door's bounds; each listener sets its own (see the
// package doc).
type Limits struct {
	// Prove bounds a readable connection's time to prove itself, from
	// its first byte: the door sets the connection's deadline to it
	// before Serve reads it (Serve may set another).
	Prove time.Duration
	// Hold is the least time a connection that sends nothing is held;
	// each is let go at a random time between Hold and twice Hold.
	Hold time.Duration
	// Held bounds the connections held, silent or waiting, at this door;
	// all the doors of a process hold together at most two thirds of its
	// descriptors.
	Held int
	// Reading bounds the connections proving themselves at once, all
	// sources together; PerSource, those of one source.
	Reading, PerSource int
	// PenaltyFirst is how long a source whose connection failed to prove
	// itself is not read, doubled for each failure that follows within
	// PenaltyMost of the last penalty's end, up to PenaltyMost. Zero: no
	// penalty.
	PenaltyFirst, PenaltyMost time.Duration
}

// Config is a door: its listener's name, bounds and proof.
type Config struct {
	// Name is what the door's note calls its listener ("ibverbs: the
	// buffer server at 10.1.2.3:4567").
	Name string
	Limits
	// Serve reads the proof of c, a readable connection, on a goroutine
	// of its own; it calls c.Through once the proof passed, and may then
	// keep c as long as it serves it. A connection Serve returns without
	// having gone through is closed, and counts as a failure of its
	// source.
	Serve func(c *Conn)
	// Note hears, once, that the door closed connections for newer ones;
	// nil: stderr.
	Note func(msg string)
}

// Counts are what a door holds now, and what it did since it opened.
type Counts struct {
	Held        int // silent, in the epoll set
	Waiting     int // readable, their source penalized
	Reading     int // proving themselves
	MostReading int // of one source
	Entered     uint64
	Displaced   uint64 // closed for newer ones
	Expired     uint64 // held past their time
}

// Door holds the connections of a listener until they prove themselves.
// It is safe for concurrent use.
type Door struct {
	cfg   Config
	epfd  int // the held's sockets; -1 where none could be made
	wake  int // an eventfd in epfd, id 0: Close, or room for the waiting
	heldN atomic.Int64
	noted atomic.Bool

	mu        sync.Mutex
	next      uint64
	byID      map[uint64]*Conn // held and waiting, by id (epoll's data)
	held      queues           // held and waiting
	waiting   queues
	reading   queues
	penalties penalties
	counts    Counts // Entered, Displaced, Expired
	closed    bool

	handlers sync.WaitGroup // Serve's goroutines
	watching chan struct{}  // closed when watch has returned
	shut     chan struct{}  // closed when Close is done
}

// Conn is a connection at the door, and once through, the listener's.
type Conn struct {
	net.Conn
	door    *Door
	id      uint64
	fd      int // its socket, -1 if it has none (not TCP)
	source  netip.Prefix
	arrived time.Time
	until   time.Time // when it is let go, held
	since   time.Time // when it turned readable
	state   state     // under door.mu
}

// Source is the source c counts against (SourceOf its peer).
func (c *Conn) Source() netip.Prefix { return c.source }

// Deadline is when c's proof must be through: Limits.Prove after its
// first byte.
func (c *Conn) Deadline() time.Time { return c.since.Add(c.door.cfg.Prove) }

// Through takes c, whose proof passed, out of the door: it is the
// listener's from now on, and its source's failures are forgiven. False
// if c was displaced meanwhile (it is closed).
func (c *Conn) Through() bool {
	d := c.door
	d.mu.Lock()
	if c.state != reading {
		d.mu.Unlock()
		return false
	}
	d.reading.remove(c)
	c.state = out
	d.penalties.forgive(c.source)
	waiting := d.waiting.n > 0
	d.mu.Unlock()
	if waiting {
		d.poke()
	}
	return true
}

// New opens a door; Serve (or Close) closes it.
func New(cfg Config) (*Door, error) {
	l := cfg.Limits
	switch {
	case cfg.Serve == nil:
		return nil, errors.New("door: no Serve")
	case l.Prove <= 0 || l.Hold <= 0 || l.Held <= 0 || l.Reading <= 0 || l.PerSource <= 0:
		return nil, fmt.Errorf("door: %s: bounds must be positive: %+v", cfg.Name, l)
	case l.PenaltyFirst < 0 || l.PenaltyFirst > 0 && l.PenaltyMost < l.PenaltyFirst:
		return nil, fmt.Errorf("door: %s: penalties of %v up to %v", cfg.Name, l.PenaltyFirst, l.PenaltyMost)
	}
	d := &Door{cfg: cfg, epfd: -1, wake: -1, byID: map[uint64]*Conn{},
		held: queues{states: held | waiting}, waiting: queues{states: waiting}, reading: queues{states: reading},
		penalties: penalties{first: l.PenaltyFirst, most: l.PenaltyMost},
		watching:  make(chan struct{}), shut: make(chan struct{})}
	if err := d.openEpoll(); err != nil {
		// Every connection is read at once: bounded still, not cheap.
		d.cfg.note(fmt.Sprintf("%s reads every connection at once: %v", cfg.Name, err))
		close(d.watching)
	} else {
		go d.watch()
	}
	processDoors.add(d)
	return d, nil
}

func (cfg *Config) note(msg string) {
	if cfg.Note != nil {
		cfg.Note(msg)
		return
	}
	fmt.Fprintln(os.Stderr, msg)
}

// openEpoll makes the epoll set and its eventfd.
func (d *Door) openEpoll() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err == nil {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN})
	}
	if err != nil {
		unix.Close(epfd)
		if wake >= 0 {
			unix.Close(wake)
		}
		return fmt.Errorf("eventfd: %w", err)
	}
	d.epfd, d.wake = epfd, wake
	return nil
}

// poke wakes the watcher.
func (d *Door) poke() {
	if d.wake >= 0 {
		unix.Write(d.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
}

// Serve takes each connection ln accepts to the door until ln is
// closed, then closes the door (Close).
func (d *Door) Serve(ln net.Listener) {
	defer d.Close()
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors or the like: wait for connections to end
			// rather than stop serving for good.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		d.Enter(c)
	}
}

// Close closes the door: what it holds, and the connections still
// proving themselves, are closed. It returns once every Serve it ran has
// returned (those of connections that went through too).
func (d *Door) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		<-d.shut
		return
	}
	d.closed = true
	var gone []*Conn
	if d.epfd < 0 {
		gone = d.dropAll()
	}
	d.mu.Unlock()
	closeAll(gone)
	d.poke()
	<-d.watching
	d.handlers.Wait()
	processDoors.remove(d)
	close(d.shut)
}

// dropAll takes every connection out of the door, for the caller to
// close outside mu. Hold mu.
func (d *Door) dropAll() (gone []*Conn) {
	for _, c := range d.byID {
		d.drop(c)
		gone = append(gone, c)
	}
	for _, sq := range d.reading.bySource {
		for _, c := range sq.cs {
			if c.state == reading {
				gone = append(gone, c)
			}
		}
	}
	for _, c := range gone {
		if c.state == reading {
			d.drop(c)
		}
	}
	return gone
}

// Counts is what the door holds now, and did since it opened.
func (d *Door) Counts() Counts {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.counts
	c.Held, c.Waiting, c.Reading = d.held.n-d.waiting.n, d.waiting.n, d.reading.n
	_, c.MostReading = d.reading.busiest()
	return c
}

// Penalized tells whether source's connections wait now, for its
// failures of late.
func (d *Door) Penalized(source netip.Prefix) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, on := d.penalties.on(source, time.Now())
	return on
}

// Enter takes a connection the listener accepted: held, or, where it
// cannot be (no epoll, not a socket), read at once.
func (d *Door) Enter(nc net.Conn) { d.enterFrom(nc, SourceOf(nc.RemoteAddr())) }

func (d *Door) enterFrom(nc net.Conn, source netip.Prefix) {
	now := time.Now()
	c := &Conn{Conn: nc, door: d, fd: socketOf(nc), source: source, arrived: now,
		until: now.Add(d.cfg.Hold + rand.N(d.cfg.Hold))}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		nc.Close()
		return
	}
	d.counts.Entered++
	d.next++
	c.id = d.next
	var gone []*Conn
	if d.hold(c) {
		if d.held.n > d.cfg.Held {
			gone = append(gone, d.displaceHeld())
		}
		d.mu.Unlock()
		closeAll(gone)
		if processDoors.held.Load() > processDoors.bound() {
			processDoors.giveWay()
		}
		return
	}
	gone = d.startReading(c, now)
	d.mu.Unlock()
	closeAll(gone)
	go d.serve(c)
}

// hold puts c in the epoll set, held, if it can be. Hold mu.
func (d *Door) hold(c *Conn) bool {
	if d.epfd < 0 || c.fd < 0 {
		return false
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(c.id), Pad: int32(c.id >> 32)}
	if unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev) != nil {
		return false
	}
	c.state = held
	d.byID[c.id] = c
	d.held.push(c)
	d.heldN.Add(1)
	processDoors.held.Add(1)
	return true
}

// startReading counts c among the reading, from now, displacing the
// oldest of its source, or of the busiest, past a bound; the caller runs
// serve(c) once it let go of mu. Hold mu.
func (d *Door) startReading(c *Conn, now time.Time) (gone []*Conn) {
	switch {
	case d.reading.count(c.source) >= d.cfg.PerSource:
		gone = append(gone, d.displace(d.reading.oldest(c.source), now))
	case d.reading.n >= d.cfg.Reading:
		busiest, _ := d.reading.busiest()
		gone = append(gone, d.displace(d.reading.oldest(busiest), now))
	}
	c.state = reading
	c.since = now
	d.reading.push(c)
	d.handlers.Add(1) // under mu, so before Close's Wait
	return gone
}

// serve runs Serve on c, then closes c if it did not go through.
func (d *Door) serve(c *Conn) {
	defer d.handlers.Done()
	c.SetDeadline(c.Deadline())
	d.cfg.Serve(c)
	d.mu.Lock()
	failed := c.state == reading
	if failed {
		d.drop(c)
		d.penalties.fail(c.source, time.Now())
	}
	waiting := d.waiting.n > 0
	d.mu.Unlock()
	if failed {
		c.Conn.Close()
	}
	if waiting {
		d.poke()
	}
}

// displace takes c out of the door for a newer connection, for the
// caller to close outside mu; one displaced while reading counts as a
// failure of its source. Hold mu.
func (d *Door) displace(c *Conn, now time.Time) *Conn {
	if c.state == reading {
		d.penalties.fail(c.source, now)
	}
	d.drop(c)
	d.counts.Displaced++
	if !d.noted.Swap(true) {
		d.cfg.note(fmt.Sprintf("%s holds as many connections that did not prove themselves as it keeps (%d held, %d reading, %d reading from one source): it closes the oldest for new ones (first from %v)",
			d.cfg.Name, d.cfg.Held, d.cfg.Reading, d.cfg.PerSource, c.source))
	}
	return c
}

// displaceHeld takes the oldest held connection of the source holding the
// most out of the door. Hold mu.
func (d *Door) displaceHeld() *Conn {
	busiest, _ := d.held.busiest()
	return d.displace(d.held.oldest(busiest), time.Now())
}

// giveWayHeld closes the oldest held connection of the source holding the
// most, if the door holds any: another door of the process needs the
// descriptor.
func (d *Door) giveWayHeld() {
	d.mu.Lock()
	if d.held.n == 0 || d.closed {
		d.mu.Unlock()
		return
	}
	c := d.displaceHeld()
	d.mu.Unlock()
	c.Close()
}

// drop takes c out of the door's lists (and epoll set). Hold mu.
func (d *Door) drop(c *Conn) {
	switch c.state {
	case held, waiting:
		unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
		delete(d.byID, c.id)
		if c.state == waiting {
			d.waiting.remove(c)
		}
		d.held.remove(c)
		d.heldN.Add(-1)
		processDoors.held.Add(-1)
	case reading:
		d.reading.remove(c)
	}
	c.state = out
}

func closeAll(cs []*Conn) {
	for _, c := range cs {
		c.Conn.Close()
	}
}

// watch hands each held connection that turns readable to Serve (or, its
// source penalized, keeps it waiting), closes those whose peer hung up
// and those held past their time, and reads the waiting whose penalty
// ended, newest first, until the door closes.
func (d *Door) watch() {
	defer close(d.watching)
	events := make([]unix.EpollEvent, 128)
	timeout := 100
	var lastExpiry time.Time
	for {
		n, err := unix.EpollWait(d.epfd, events, timeout)
		if err != nil {
			n = 0
			if err != unix.EINTR {
				time.Sleep(10 * time.Millisecond)
			}
		}
		now := time.Now()
		var ready, gone []*Conn
		d.mu.Lock()
		if d.closed {
			gone = d.dropAll()
			d.mu.Unlock()
			closeAll(gone)
			unix.Close(d.epfd)
			unix.Close(d.wake)
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				var b [8]byte
				unix.Read(d.wake, b[:])
				continue
			}
			c := d.byID[id]
			switch {
			case c == nil: // displaced or let go since
			case c.state == held && readable(c, ev.Events):
				if _, on := d.penalties.on(c.source, now); on {
					d.wait(c)
					continue
				}
				d.drop(c)
				gone = append(gone, d.startReading(c, now)...)
				ready = append(ready, c)
			default: // hung up: held, saying nothing, or waiting
				d.drop(c)
				gone = append(gone, c)
			}
		}
		ready = d.release(now, ready)
		if now.Sub(lastExpiry) >= 100*time.Millisecond {
			gone = append(gone, d.expire(now)...)
			lastExpiry = now
		}
		timeout = d.nextWake(now)
		d.mu.Unlock()
		closeAll(gone)
		for _, c := range ready {
			go d.serve(c)
		}
	}
}

// readable tells whether the event of c, held, says it has bytes to
// read: one whose peer hung up without a word has none, and is let go
// without a goroutine.
func readable(c *Conn, events uint32) bool {
	if events&unix.EPOLLIN == 0 {
		return false
	}
	if events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
		return true
	}
	n, err := unix.IoctlGetInt(c.fd, unix.SIOCINQ)
	return err == nil && n > 0
}

// wait keeps c, readable, waiting for its source's penalty to end,
// watching only for its peer to hang up. Hold mu.
func (d *Door) wait(c *Conn) {
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(c.id), Pad: int32(c.id >> 32)}
	unix.EpollCtl(d.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev)
	c.state = waiting
	d.waiting.push(c)
}

// release reads the waiting of each source no longer penalized, newest
// first, while the reading bounds leave room, and adds them to ready.
// Hold mu.
func (d *Door) release(now time.Time, ready []*Conn) []*Conn {
	for source := range d.waiting.bySource {
		if _, on := d.penalties.on(source, now); on {
			continue
		}
		for d.reading.count(source) < d.cfg.PerSource && d.reading.n < d.cfg.Reading {
			c := d.waiting.newest(source)
			if c == nil {
				break
			}
			d.drop(c)
			d.startReading(c, now) // room: no one displaced
			ready = append(ready, c)
		}
	}
	return ready
}

// expire takes out the held whose time is past. Only those that came
// Hold ago or more may be, and a source's list is in order of arrival:
// its front is all there is to look at. Hold mu.
func (d *Door) expire(now time.Time) (gone []*Conn) {
	for _, sq := range d.held.bySource {
		for _, c := range sq.cs {
			if !d.held.alive(c) {
				continue
			}
			if now.Sub(c.arrived) < d.cfg.Hold {
				break
			}
			if !now.Before(c.until) {
				gone = append(gone, c)
			}
		}
	}
	for _, c := range gone {
		d.drop(c)
	}
	d.counts.Expired += uint64(len(gone))
	return gone
}

// nextWake is how long the watcher may wait for events, in ms: 100, or
// less when a penalty of a source whose connections wait ends sooner.
// Hold mu.
func (d *Door) nextWake(now time.Time) int {
	wake := 100 * time.Millisecond
	for source := range d.waiting.bySource {
		if until, on := d.penalties.on(source, now); on {
			wake = min(wake, until.Sub(now))
		}
	}
	return max(int((wake+time.Millisecond-1)/time.Millisecond), 1)
}

// socketOf is c's socket, or -1: a TCP connection's, under TLS or not.
func socketOf(c net.Conn) int {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
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
