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
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/door"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// Transfers between machines, the tcp backend: each process that owns
// buffers serves them on one TCP port, on the address it reaches the
// job's bus from (what the other hosts can dial). A request is
//
//	op(1) key(8) off(8) len(8) [len bytes for 'w'; a(8) b(8) for 'a', 'c']
//
// with op 'r' (read), 'w' (write), 'a' (fetch-and-add a) or 'c'
// (compare a, swap b) (and 'W', a write then an add: writeadd.go; 'k',
// which hands the connection over to the owner: connect.go),
// answered by status(1: 0 ok, 1 no such buffer, 2
// out of range) and, for a read, len bytes, for an atomic the word as it
// was (8). A read of no bytes at a buffer's size asks whether the owner
// serves it (Handle.Check). Connections are kept and reused. A large
// read or write is cut in parts that go on parallel connections
// (EnvTCPStreams): one stream is bound by one core's copying, and by one
// connection's window.
//
// Anyone who can reach the port can connect, and nothing is spent on a
// connection before it proves itself (the server's door, internal/door):
// its first request must name a buffer of this process by its key within
// authBound of its first byte, and until it does it is held, a socket and
// no goroutine, until it has something to read, then reads only its
// header; both are bounded, the reading per source too. What a door's
// source is, and what gives way past its bounds, is the door's (see
// internal/door); the bounds are the buffer server's, below, and a
// wrong key costs its source no penalty: the peer of a buffer closed a
// moment ago is one of the job's. A peer that proved itself is another
// process of the job, but a buggy or stalled one must not make the owner
// hold goroutines, sockets and memory without end either: the server
// closes a connection on which no request starts within serverIdleBound,
// or on which a started request stops moving for requestProgressBound,
// and serves at most maxServedConns at once. A client holds the owner to
// progress the same way (clientProgressBound), keeps an idle connection
// for clientIdleBound only, well inside the server's bound, and sends a
// request again on a new connection when one turns out closed before the
// owner read any of it.

// The bounds of the buffer server and of its clients.
const (
	// authBound (5 s) is how long a new connection has to prove itself,
	// from its first byte: a TLS handshake and a request's header, which
	// a client sends at once, take milliseconds; a connection that sends
	// half is closed at the bound.
	authBound = 5 * time.Second
	// holdBound (30 s) is the least time a connection that sends nothing
	// is held; each is let go at a random time between it and twice it.
	// It costs a socket, and letting it go sooner would only make a flood
	// open another sooner.
	holdBound = 30 * time.Second
	// maxPending (1024) bounds the connections reading their first
	// request, all sources together: at most a few MiB of goroutines and
	// TLS state.
	maxPending = 1024
	// maxPendingPerSource (128) bounds them per source: more than a host's
	// procs dial at once (a batch of 16 transfers on 4 streams each, from
	// a few procs of the host).
	maxPendingPerSource = 128
	// maxHeld (65536) bounds the connections held, silent; all the doors
	// of a process together hold at most two thirds of its descriptors.
	maxHeld = 1 << 16
	// serverIdleBound (2 minutes) is how long the server waits for a
	// request to start on a connection that proved itself (its first
	// byte) before it closes the connection: a peer that keeps a
	// connection it no longer uses holds it no longer.
	serverIdleBound = 2 * time.Minute
	// requestProgressBound (1 minute) is how long a started request may
	// take to move each progressChunk (1 MiB) of itself, or of its answer:
	// its header and body must keep arriving, its answer must keep being
	// taken, or the server closes the connection. Progress is bounded, not
	// the total, so a gigabyte over a slow link (down to about 17 KiB/s)
	// goes through, while a peer that stops halfway, or never reads the
	// answer, is cut off within a minute. It also bounds how long a stalled
	// peer can hold off the buffer's Close.
	requestProgressBound = time.Minute
	// progressChunk (1 MiB) is the amount of a request, or of its answer,
	// that must move within requestProgressBound (clientProgressBound for
	// a client).
	progressChunk = 1 << 20
	// maxServedConns (4096) bounds the connections that proved themselves
	// one owning process serves at once; past it a new one is closed once
	// it did, until some end (the first time, the server says so on
	// stderr). A reader holds per owner the connections of its transfers
	// under way (4 for a large transfer, DefaultTCPStreams; up to 16 x 4
	// for a batch, Do) and keeps them idle for clientIdleBound (at most
	// maxIdleConns): 512 readers that each made a large transfer from one
	// owner hold half the bound. Each connection served costs a goroutine
	// and a serveReadBuffer: at most 256 MiB of read buffers at the bound.
	maxServedConns = 4096
	// serveReadBuffer (64 KiB) is each served connection's read buffer,
	// made once the connection proved itself: a header and a small body
	// arrive in one read; a larger body is read straight into the
	// buffer's memory.
	serveReadBuffer = 64 << 10
	// clientIdleBound (1 minute) is how long a client keeps an idle
	// connection to an owner for reuse: half the server's idle bound, so
	// the server does not close connections the client still counts on.
	clientIdleBound = time.Minute
	// clientProgressBound (10 s) is how long a client waits for each
	// progressChunk of a request to be taken, or of its answer to come:
	// an owner that accepts and never answers, or stops halfway, fails
	// the transfer within seconds, not at transferBound. It is shorter
	// than the server's bound: an owner serves from memory, and 100 KiB/s
	// is no link between a job's hosts.
	clientProgressBound = 10 * time.Second
	// connectBound (10 s) bounds reaching an owner: the TCP connection and
	// its TLS handshake.
	connectBound = 10 * time.Second
	// redialFor (5 s) is how long a client dials an owner again when a
	// new connection is closed before the owner read any of its request:
	// the door let it go for newer ones (a flood), or the served bound
	// was reached.
	redialFor = 5 * time.Second
)

// serverLimits are the bounds a buffer server holds its peers to; tests
// start servers with shorter ones.
type serverLimits struct {
	auth      time.Duration // authBound
	hold      time.Duration // holdBound
	idle      time.Duration // serverIdleBound
	progress  time.Duration // requestProgressBound
	conns     int           // maxServedConns
	held      int           // maxHeld
	pending   int           // maxPending
	perSource int           // maxPendingPerSource
}

// defaultServerLimits are the bounds of a process's buffer server.
var defaultServerLimits = serverLimits{auth: authBound, hold: holdBound, idle: serverIdleBound, progress: requestProgressBound,
	conns: maxServedConns, held: maxHeld, pending: maxPending, perSource: maxPendingPerSource}

// tcpServer is the owner side: one listener per process, started with
// the process's first buffer. The process holds it under its mu.
type tcpServer struct {
	p      *process
	ln     net.Listener
	addr   string
	pin    string // its certificate's SHA-256 when it serves TLS
	limits serverLimits
	door   *door.Door // the connections that have not proved themselves yet
	// served holds a token for each connection being served, up to
	// limits.conns.
	served chan struct{}
	// admitted counts connections that proved themselves; refused, those
	// of them closed for the served bound.
	admitted, refused atomic.Uint64
}

// serveTCP starts this process's server once and returns its address, and
// its certificate's SHA-256 when it serves TLS (the job's bus does).
func (p *process) serveTCP() (addr, pin string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tcp == nil {
		ln, err := net.Listen("tcp", net.JoinHostPort(listenHost(), "0"))
		if err != nil {
			return "", "", fmt.Errorf("ibverbs: serve buffers: %w", err)
		}
		if jobenv.BusTLS() {
			cert, sum, err := selfSigned()
			if err != nil {
				ln.Close()
				return "", "", fmt.Errorf("ibverbs: a certificate for the buffer server: %w", err)
			}
			ln, pin = tls.NewListener(ln, serverTLS(cert)), sum
		}
		s, err := p.startServer(ln, pin, defaultServerLimits)
		if err != nil {
			ln.Close()
			return "", "", err
		}
		p.tcp = s
	}
	return p.tcp.addr, p.tcp.pin, nil
}

// startServer serves this process's buffers on ln, through its door,
// until ln is closed.
func (p *process) startServer(ln net.Listener, pin string, limits serverLimits) (*tcpServer, error) {
	s, err := p.newServer(ln.Addr().String(), pin, limits)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	go s.door.Serve(ln)
	return s, nil
}

// newServer is a server of this process's buffers at addr, not yet
// serving: its door is open, its listener for the caller to give it.
func (p *process) newServer(addr, pin string, limits serverLimits) (*tcpServer, error) {
	s := &tcpServer{p: p, addr: addr, pin: pin, limits: limits, served: make(chan struct{}, limits.conns)}
	var err error
	s.door, err = door.New(door.Config{Name: "ibverbs: the buffer server at " + addr, Serve: s.serveConn,
		Limits: door.Limits{Prove: limits.auth, Hold: limits.hold, Held: limits.held, Reading: limits.pending, PerSource: limits.perSource}})
	if err != nil {
		return nil, fmt.Errorf("ibverbs: serve buffers: %w", err)
	}
	return s, nil
}

// listenHost is this host's address on the route to the job's hub (as
// the proc's agent found it: the proc's own bus may be its host's leaf,
// on loopback), or on the route to its bus, or loopback without one.
func listenHost() string {
	if a := jobenv.HostAddr(); a != "" {
		return a
	}
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

// serveConn serves dc, a connection the door found readable: first its
// first request, which must name a buffer here within limits.auth of its
// first byte (the door's deadline); then, once through (and within the
// served bound), its requests one after another, until the peer hangs
// up, breaks the protocol or the server's limits.
func (s *tcpServer) serveConn(dc *door.Conn) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(dc, hdr[:]); err != nil {
		return
	}
	if s.p.lookup(binary.LittleEndian.Uint64(hdr[1:9])) == nil {
		// No buffer of this process has that key (a closed one's peer,
		// or a stranger): its one request is answered, under the door's
		// deadline and with a reader of a few bytes, and the door closes
		// the connection.
		s.serveRequest(dc, dc, bufio.NewReaderSize(dc, 16), hdr)
		return
	}
	if !dc.Through() {
		return // displaced meanwhile: closed
	}
	c := dc.Conn
	handed := false
	defer func() {
		if !handed {
			c.Close()
		}
	}()
	s.admitted.Add(1)
	select {
	case s.served <- struct{}{}:
		defer func() { <-s.served }()
	default:
		if s.refused.Add(1) == 1 {
			fmt.Fprintf(os.Stderr, "ibverbs: the buffer server at %s serves %d connections, its bound: it closes new ones until some end\n", s.addr, s.limits.conns)
		}
		return
	}
	handed = s.serveRequests(c, hdr)
}

// serveRequests serves the requests of c, which proved itself with the
// first, whose header is hdr; handed says c was handed over (connect.go).
func (s *tcpServer) serveRequests(c net.Conn, hdr [headerLen]byte) (handed bool) {
	sc := &servedConn{pacedConn: pacedConn{Conn: c, bound: s.limits.progress}, idle: s.limits.idle}
	r := bufio.NewReaderSize(sc, serveReadBuffer)
	sc.startRequest()
	for {
		handed, err := s.serveRequest(sc, c, r, hdr)
		if handed || err != nil {
			return handed
		}
		sc.awaitRequest()
		if _, err := r.Peek(1); err != nil {
			return false
		}
		sc.startRequest()
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return false
		}
	}
}

// serveRequest serves one request, whose header is hdr and whose rest r
// reads, answering on c (raw is the connection under c, for connect.go):
// handed says raw was handed over; an error, that the connection cannot
// go on.
func (s *tcpServer) serveRequest(c, raw net.Conn, r *bufio.Reader, hdr [headerLen]byte) (handed bool, err error) {
	op, key := hdr[0], binary.LittleEndian.Uint64(hdr[1:9])
	off, n := binary.LittleEndian.Uint64(hdr[9:17]), binary.LittleEndian.Uint64(hdr[17:25])
	switch op {
	case 'r', 'w':
		return false, s.p.serveCopy(c, r, key, op, off, n)
	case byte(opFetchAdd), byte(opCAS):
		return false, s.p.serveAtomic(c, r, key, atomicOp(op), off, n)
	case 'q':
		return false, s.p.serveHandshake(c, r, key, n)
	case writeAddOp:
		return false, s.p.serveWriteAdd(c, r, key, off, n)
	case connectOp:
		return s.p.serveConnect(c, raw, r, key, off, n)
	}
	return false, fmt.Errorf("request %q: not this protocol", op) // nothing after it can be trusted
}

// servedConn is a connection the server serves, holding its peer to the
// server's limits through deadlines: between requests, the next must
// start within idle; once one has started, each progressChunk of it
// must arrive, and each of its answer be taken, within its bound. Only
// serveConn's goroutine uses it.
type servedConn struct {
	pacedConn
	idle    time.Duration
	waiting bool // between requests: the idle deadline stands
}

// awaitRequest starts the wait for the next request.
func (c *servedConn) awaitRequest() {
	c.waiting = true
	c.Conn.SetDeadline(time.Now().Add(c.idle))
}

// startRequest starts the progress bound of a request whose first byte
// has arrived.
func (c *servedConn) startRequest() {
	c.waiting = false
	c.Conn.SetDeadline(time.Now().Add(c.bound))
	c.readLeft = progressChunk
}

func (c *servedConn) Read(b []byte) (int, error) {
	if c.waiting {
		return c.Conn.Read(b)
	}
	return c.pacedConn.Read(b)
}

// serveCopy serves a read or a write of n bytes at off.
func (p *process) serveCopy(c net.Conn, r *bufio.Reader, key uint64, op byte, off, n uint64) error {
	b, status, release := p.lockSpan(key, off, n)
	defer release()
	var span []byte
	if status == statusOK {
		span = b.mem[off : off+n]
	}
	return answer(c, r, span, op, n, status)
}

// lockSpan finds the buffer of key and says whether n bytes at off lie in
// its memory (statusOK, or why not); release lets go of the buffer, whose
// Close waits for it meanwhile.
func (p *process) lockSpan(key, off, n uint64) (b *Buffer, status byte, release func()) {
	b = p.lookup(key)
	if b == nil {
		return nil, statusNoSuch, func() {}
	}
	b.mu.RLock() // held while the request touches its memory
	switch {
	case b.mem == nil:
		status = statusNoSuch
	case off > uint64(len(b.mem)) || n > uint64(len(b.mem))-off:
		status = statusRange
	}
	if status != statusOK {
		// A refused request touches no memory: the body it may still
		// carry is drained without holding up the buffer's Close.
		b.mu.RUnlock()
		return b, status, func() {}
	}
	return b, status, b.mu.RUnlock
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
	register("tcp", func(*process) backend { return newTCPBackend(defaultClientLimits) })
}

// clientLimits are the bounds a client holds owners to, and keeps idle
// connections for; tests use shorter ones.
type clientLimits struct {
	keepIdle time.Duration // clientIdleBound
	connect  time.Duration // connectBound
	progress time.Duration // clientProgressBound
	redial   time.Duration // redialFor
}

var defaultClientLimits = clientLimits{keepIdle: clientIdleBound, connect: connectBound, progress: clientProgressBound, redial: redialFor}

// tcpBackend is the client side: it reaches any buffer whose owner's
// server it can dial, keeping idle connections to owners for reuse.
type tcpBackend struct {
	limits clientLimits

	mu   sync.Mutex
	idle map[string][]idleConn // by owner address and pin (connKey), oldest first, at most maxIdleConns each
}

// idleConn is a connection kept for reuse, since its last request ended.
type idleConn struct {
	net.Conn
	since time.Time
}

func newTCPBackend(limits clientLimits) *tcpBackend {
	return &tcpBackend{limits: limits, idle: map[string][]idleConn{}}
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

// takeIdle is the connection last kept under k, or nil. Connections kept
// longer than keepIdle are closed instead: the owner may be closing them.
func (t *tcpBackend) takeIdle(k string) net.Conn {
	t.mu.Lock()
	stale := t.dropStale(k, time.Now())
	var c net.Conn
	if cs := t.idle[k]; len(cs) > 0 {
		c = cs[len(cs)-1].Conn
		t.idle[k] = cs[:len(cs)-1]
		if len(cs) == 1 {
			delete(t.idle, k)
		}
	}
	t.mu.Unlock()
	closeAll(stale)
	return c
}

// putConn keeps c under k for reuse, or closes it if k has enough.
func (t *tcpBackend) putConn(k string, c net.Conn) {
	c.SetDeadline(time.Time{})
	now := time.Now()
	t.mu.Lock()
	stale := t.dropStale(k, now)
	if len(t.idle[k]) < maxIdleConns {
		t.idle[k] = append(t.idle[k], idleConn{Conn: c, since: now})
	} else {
		stale = append(stale, idleConn{Conn: c})
	}
	t.mu.Unlock()
	closeAll(stale)
}

// dropIdle forgets every connection kept under k and closes them: one was
// found closed by the owner, and the others are older.
func (t *tcpBackend) dropIdle(k string) {
	t.mu.Lock()
	cs := t.idle[k]
	delete(t.idle, k)
	t.mu.Unlock()
	closeAll(cs)
}

// dropStale takes out the connections kept under k for keepIdle or
// longer at now, for the caller to close outside t.mu.
func (t *tcpBackend) dropStale(k string, now time.Time) []idleConn {
	cs := t.idle[k]
	i := 0
	for i < len(cs) && now.Sub(cs[i].since) >= t.limits.keepIdle {
		i++
	}
	if i == 0 {
		return nil
	}
	stale := slices.Clone(cs[:i])
	if i == len(cs) {
		delete(t.idle, k)
	} else {
		t.idle[k] = slices.Delete(cs, 0, i)
	}
	return stale
}

func closeAll(cs []idleConn) {
	for _, c := range cs {
		c.Close()
	}
}

// dialOwner connects to an owner's server at addr, within the bound: with
// TLS, accepting only the certificate pin names, when pin is set. The
// error says so, marked errHungUp if the owner closed the connection.
func dialOwner(ctx context.Context, addr, pin string, within time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var d net.Dialer
	var c net.Conn
	var err error
	if pin == "" {
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		td := tls.Dialer{NetDialer: &d, Config: clientTLS(pin)}
		c, err = td.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("ibverbs: reach the buffer's owner at %s (within %v): %w", addr, within, hungUp(err, 0))
	}
	return c, nil
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

// onConn runs fn, one request, on a connection to h's owner, bounded by
// ctx, by transferBound and by the owner's progress; the connection is
// kept for reuse if fn succeeds. When a connection turns out closed
// before the owner answered any of the request (errHungUp), the request
// goes again on a new connection: at once after an idle one (whose
// elders, kept with it, are closed too), and after a pause, growing, for
// limits.redial at most, after a new one, which the owner's door let go
// for newer ones (internal/door). That is safe because the owner acts on a
// request only once it read it whole, closes a connection that proved
// itself only between requests (for idleness, serverIdleBound) or when a
// request on it stops moving, and answers a request it acted on before it
// closes: an atomic is not applied twice; a write sent again puts the
// same bytes in the same place.
func (t *tcpBackend) onConn(ctx context.Context, h Handle, fn func(net.Conn) error) error {
	k := connKey(h.Addr, h.TLS)
	if c := t.takeIdle(k); c != nil {
		err := t.request(ctx, k, c, fn)
		if !errors.Is(err, errHungUp) {
			return err
		}
		t.dropIdle(k)
	}
	start, pause := time.Now(), 5*time.Millisecond
	for {
		c, err := dialOwner(ctx, h.Addr, h.TLS, t.limits.connect)
		if err == nil {
			err = t.request(ctx, k, c, fn)
		}
		if !errors.Is(err, errHungUp) || time.Since(start)+pause > t.limits.redial {
			return err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// paced is c under the bounds of a request: progress (each progressChunk
// within bound), and an end at ctx's deadline, at most transferBound
// away; stop, context.AfterFunc's, ends them when ctx ends first (so that
// a read or write blocked on c returns).
func paced(ctx context.Context, c net.Conn, bound time.Duration) (pc *pacedConn, stop func() bool) {
	end := time.Now().Add(transferBound)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	pc = &pacedConn{Conn: c, bound: bound, end: end}
	return pc, context.AfterFunc(ctx, pc.stop)
}

// request runs fn on c, kept under k afterwards if fn succeeds and
// closed if not.
func (t *tcpBackend) request(ctx context.Context, k string, c net.Conn, fn func(net.Conn) error) error {
	pc, stop := paced(ctx, c, t.limits.progress)
	defer stop()
	if err := fn(pc); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return pc.why(err)
	}
	t.putConn(k, c)
	return nil
}

// why is err, a request's failure on c, saying which bound passed if one
// did.
func (c *pacedConn) why(err error) error {
	switch {
	case !errors.Is(err, os.ErrDeadlineExceeded):
		return err
	case time.Now().Before(c.end):
		return fmt.Errorf("%w (less than %d MiB of it moved in %v: the owner stalled)", err, progressChunk>>20, c.bound)
	}
	return fmt.Errorf("%w (the request's end passed: a transfer lasts %v at most)", err, transferBound)
}

// errHungUp marks a request whose connection the owner had closed before
// answering any of it: sending it failed, or reading its answer found the
// connection closed with nothing read.
var errHungUp = errors.New("the owner closed the connection before answering")

// hungUp is err, a failure to reach the owner, to send a request or to
// read its answer after read bytes of it, marked errHungUp if nothing was
// read and err says the connection was closed.
func hungUp(err error, read int) error {
	if read == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		return fmt.Errorf("%w: %w", errHungUp, err)
	}
	return err
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
		return 0, fmt.Errorf("ibverbs: send to %s: %w", h.Addr, hungUp(err, 0))
	}
	var out [9]byte
	if n, err := io.ReadFull(c, out[:]); err != nil {
		return 0, fmt.Errorf("ibverbs: answer from %s: %w", h.Addr, hungUp(err, n))
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
	if err := send(c, bufs); err != nil {
		return fmt.Errorf("ibverbs: send to %s: %w", h.Addr, hungUp(err, 0))
	}
	var st [1]byte
	if n, err := io.ReadFull(c, st[:]); err != nil {
		return fmt.Errorf("ibverbs: answer from %s: %w", h.Addr, hungUp(err, n))
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
