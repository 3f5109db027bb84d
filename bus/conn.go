package bus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	// DefaultQueueLen is the capacity of a connection's receive queue, in
	// messages. The reader never blocks on it: a full queue drops the
	// message and reports ErrSlowConsumer, so it is sized for bursts. It
	// is a bound, not an allocation: the queue grows to it on demand
	// (queue.go).
	DefaultQueueLen = 1 << 18
	// DefaultMaxMessage is the largest message Publish takes: 1 GiB.
	DefaultMaxMessage = 1 << 30
	// DefaultPingInterval and DefaultMaxPingsOut decide how fast a silent
	// link is declared lost: after about interval x (pings out + 1).
	DefaultPingInterval = 2 * time.Second
	DefaultMaxPingsOut  = 3
	connectTimeout      = 5 * time.Second
)

// ConnOptions configures Connect and ConnectInProcess.
type ConnOptions struct {
	// Name shows in server diagnostics.
	Name string
	// Token is the server's secret (Connect only; ConnectInProcess takes it
	// from the server).
	Token string
	// QueueLen bounds the receive queue: the messages that wait for Run
	// (and up to Transit more on their way into it). Default
	// DefaultQueueLen.
	QueueLen int
	// Transit is how many messages NATS's reader can hand over while the
	// goroutine that moves them into the queue waits for a CPU (see
	// queue.go); past it they are dropped, as past QueueLen. Default
	// DefaultTransit; at most QueueLen. A process that all the others
	// answer at once (the job's client) wants it as long as QueueLen.
	Transit int
	// MaxMessage is the largest message Publish accepts and Run
	// reassembles. Default DefaultMaxMessage. Give every process of a job
	// the same value: a receiver drops a chunked message over its own.
	MaxMessage int
	// MaxReassembly bounds the bytes held, over all senders, for chunked
	// messages whose parts are still arriving; a part that would pass it
	// drops its message (DropChunkLimit). Default twice MaxMessage; it may
	// not be less than MaxMessage.
	MaxReassembly int
	// PingInterval and MaxPingsOut tune lost-link detection. Defaults
	// DefaultPingInterval and DefaultMaxPingsOut.
	PingInterval time.Duration
	MaxPingsOut  int
	// TLS, when on, secures the connection (Connect only): what it
	// trusts of the server's certificate.
	TLS ClientTLS
	// HubServers is the number of servers of the hub this connection's
	// server belongs to, or links to as a leaf. With more than one, a
	// Publish that follows a Subscribe (or a reconnect) first waits until
	// every live server of the hub knows the subscriptions (see
	// hubsync.go): a process told of one by this one's next message,
	// through any server, reaches it. It waits at most HubSyncBound, and
	// not for a server that died. Default 1: through one hub that holds
	// without waiting.
	HubServers int
	// OnError receives asynchronous faults: ErrSlowConsumer, the cause of
	// a lost link, and the first dropped message of each DropKind (a
	// *DropError, which wraps ErrMalformed). It is called from the
	// connection's own goroutines and must not block. May be nil.
	OnError func(error)
	// ReconnectFor, when positive, lets a link that drops reconnect, for
	// at most this long from the drop; then it is lost (ErrClosed), as a
	// link that does not reconnect is at once. It reconnects to the
	// servers Connect was given, in order, starting after the one it
	// lost, and to the other servers of the hub its server named: a Conn
	// whose hub server died moves to a live one. While it is down,
	// subscriptions are kept and Publish buffers up to ReconnectBuffer
	// bytes (then fails with ErrNotSent). What was on the way when it
	// dropped, and what the server had for this connection while it was
	// down, is lost; after a move to another server, a message published
	// before the drop may also arrive after one published since (see the
	// package doc): the caller makes up for both (actorrt's delivery
	// layer resends and reorders). OnLink, if set, hears each drop
	// (up=false, with the cause) and each reconnect (up=true).
	ReconnectFor    time.Duration
	ReconnectBuffer int
	OnLink          func(up bool, err error)
	// ConnectFor, when positive, has Connect try again, backing off from
	// 50ms to 1s, while the server refuses the connection or does not
	// answer (a host whose server is still starting, a machine too busy
	// to answer in time), for at most this long. A wrong token or TLS
	// setting fails at once.
	ConnectFor time.Duration
}

// DefaultReconnectBuffer is ConnOptions.ReconnectBuffer's default: 64 MiB.
const DefaultReconnectBuffer = 64 << 20

// Message is one message as received. The handler owns Data.
type Message struct {
	Subject string
	Data    []byte
}

// Conn is a process's connection to the bus. See the package doc for its
// ordering and delivery guarantees.
type Conn struct {
	nc         *nats.Conn
	queue      *recvQueue
	closed     chan struct{}
	closeOnce  sync.Once
	closing    atomic.Bool // Close was called: the end is not a fault
	lostLink   atomic.Bool // it stayed down past ReconnectFor: reported already
	onError    func(error)
	maxMessage int
	maxPayload int // the server's, read once: a hub's servers share it
	chunkBase  string
	chunkSeq   atomic.Uint64
	drops      drops

	// Reassembly, owned by the Run goroutine (see chunk.go).
	partials      map[string]*partial
	held          int // bytes the partials count against maxReassembly
	maxReassembly int

	hub     *hubSync      // with HubServers > 1
	relinks atomic.Uint64 // times the link came back (reconnect.go)

	pubMu   sync.Mutex // orders every NATS publish of this Conn
	pending batch      // see batch.go
	scratch []byte     // joins the parts of a message (PublishParts)
	lastPub time.Duration
	kick    chan struct{}
}

// Connect dials a bus server over TCP. url may name several servers of
// one hub, separated by commas: they are tried in order.
func Connect(url string, o ConnOptions) (*Conn, error) {
	if o.Token == "" {
		return nil, fmt.Errorf("bus: connect %s: no token", url)
	}
	opts := []nats.Option{nats.Token(o.Token)}
	if o.TLS.On() {
		cfg, err := o.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("bus: connect %s: %w", url, err)
		}
		opts = append(opts, nats.Secure(cfg))
	}
	deadline := time.Now().Add(o.ConnectFor)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err := connect(url, o, opts...)
		if err == nil || !transient(err) || time.Now().Add(wait).After(deadline) {
			return c, err
		}
		time.Sleep(wait)
	}
}

// transient: a connect error that trying again may cure: anything but a
// refused secret or certificate (a refused or unanswered dial, and a
// handshake cut short, as when a busy server's first PING overtakes its
// PONG: "expected 'PONG', got 'PING'").
func transient(err error) bool {
	var (
		unknownCA *x509.UnknownAuthorityError
		badName   x509.HostnameError
		badCert   *tls.CertificateVerificationError
	)
	return !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthExpired) &&
		!errors.Is(err, nats.ErrAuthRevoked) && !errors.As(err, &unknownCA) && !errors.As(err, &badName) &&
		!errors.As(err, &badCert) && !strings.Contains(err.Error(), "x509:")
}

// ConnectInProcess connects to a server in this process without TCP.
func ConnectInProcess(s *Server, o ConnOptions) (*Conn, error) {
	return connect("", o, nats.InProcessServer(s.ns), nats.Token(s.token))
}

func connect(url string, o ConnOptions, extra ...nats.Option) (*Conn, error) {
	if o.QueueLen <= 0 {
		o.QueueLen = DefaultQueueLen
	}
	if o.Transit <= 0 {
		o.Transit = DefaultTransit
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.MaxReassembly <= 0 {
		o.MaxReassembly = 2 * o.MaxMessage
	}
	if o.MaxReassembly < o.MaxMessage {
		return nil, fmt.Errorf("bus: max reassembly %d is below max message %d", o.MaxReassembly, o.MaxMessage)
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.MaxPingsOut <= 0 {
		o.MaxPingsOut = DefaultMaxPingsOut
	}
	c := &Conn{
		queue:      newRecvQueue(o.QueueLen, o.Transit),
		closed:     make(chan struct{}),
		onError:    o.OnError,
		maxMessage: o.MaxMessage,
		chunkBase:  NewToken()[:12],
		kick:       make(chan struct{}, 1),

		partials:      map[string]*partial{},
		maxReassembly: o.MaxReassembly,
	}
	var reconnect []nats.Option
	if o.ReconnectFor <= 0 {
		reconnect = []nats.Option{nats.NoReconnect()}
	} else {
		if o.ReconnectBuffer <= 0 {
			o.ReconnectBuffer = DefaultReconnectBuffer
		}
		reconnect = c.reconnectOptions(o)
	}
	opts := append([]nats.Option{
		nats.Name(o.Name),
		nats.Timeout(connectTimeout),
		nats.DontRandomize(), // the servers in the order given, then those the hub names
		nats.PingInterval(o.PingInterval),
		nats.MaxPingsOutstanding(o.MaxPingsOut),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			switch {
			case errors.Is(err, nats.ErrSlowConsumer):
				c.report(ErrSlowConsumer)
			case errors.Is(err, nats.ErrBadHeaderMsg):
				// nats.go passed the message on without its headers; Run
				// sees its bytes as a whole message.
				subject := ""
				if sub != nil {
					subject = sub.Subject
				}
				c.drop(DropHeader, subject, "NATS headers that cannot be decoded (the bytes were passed on without them)")
			default:
				c.report(err)
			}
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if !c.closing.Load() && !c.lostLink.Load() {
				cause := nc.LastError()
				if cause == nil {
					cause = errors.New("server closed the connection")
				}
				c.report(fmt.Errorf("%w: link lost: %w", ErrClosed, cause))
			}
			c.markClosed()
		}),
	}, append(reconnect, extra...)...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		where := url
		if where == "" {
			where = "in-process server"
		}
		return nil, fmt.Errorf("bus: connect %s: %w", where, err)
	}
	c.nc = nc
	if c.hub, err = newHubSync(nc, o.HubServers); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: connect: %w", err)
	}
	c.maxPayload = int(nc.MaxPayload())
	go c.flusher()
	go c.queue.pump(c.closed, func() { c.report(ErrSlowConsumer) })
	return c, nil
}

func (c *Conn) report(err error) {
	if c.onError != nil {
		c.onError(err)
	}
}

func (c *Conn) markClosed() { c.closeOnce.Do(func() { close(c.closed) }) }

// Subscribe adds subject to the connection's ordered receive path.
func (c *Conn) Subscribe(subject string) (*Subscription, error) {
	s, err := c.nc.ChanSubscribe(subject, c.queue.transit)
	if err != nil {
		return nil, fmt.Errorf("bus: subscribe %s: %w", subject, mapErr(err))
	}
	c.hub.subscribed()
	return &Subscription{s: s}, nil
}

// Watch subscribes fn to subject beside the ordered receive path: fn runs
// as each message arrives, on a goroutine of the subscription's own,
// however far behind Run's handler is. It is for liveness signals, which
// must be timed when they arrive, not when a busy handler reaches them.
// Its messages are small (a chunked one is dropped) and unordered with
// the rest.
func (c *Conn) Watch(subject string, fn func(Message)) (*Subscription, error) {
	s, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
		switch {
		case m.Header == nil:
			fn(Message{Subject: m.Subject, Data: m.Data})
		case m.Header.Get(batchHeader) != "":
			c.unbatch(m, m.Header.Get(batchHeader), fn)
		default:
			c.drop(DropHeader, m.Subject, "a watched subject takes neither chunks nor NATS headers (%d keys)", len(m.Header))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bus: watch %s: %w", subject, mapErr(err))
	}
	c.hub.subscribed()
	return &Subscription{s: s}, nil
}

// Subscription is one subject on the receive path.
type Subscription struct{ s *nats.Subscription }

// Unsubscribe stops delivery for this subject; messages already queued are
// still handed to Run's handler.
func (s *Subscription) Unsubscribe() error {
	if err := s.s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("bus: unsubscribe %s: %w", s.s.Subject, err)
	}
	return nil
}

// Flush waits until the server has processed everything published so far.
func (c *Conn) Flush(ctx context.Context) error {
	c.pubMu.Lock()
	err := c.flushPendingLocked()
	c.pubMu.Unlock()
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, connectTimeout)
		defer cancel()
	}
	return mapErr(c.nc.FlushWithContext(ctx))
}

// MaxPayload is the largest message the server takes in one piece.
func (c *Conn) MaxPayload() int { return c.maxPayload }

// MaxMessage is the largest message Publish takes (ConnOptions.MaxMessage).
func (c *Conn) MaxMessage() int { return c.maxMessage }

// Closed is closed once the connection is gone.
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// Close drains nothing and closes the connection. Idempotent.
func (c *Conn) Close() {
	c.pubMu.Lock()
	c.flushPendingLocked()
	c.pubMu.Unlock()
	c.closing.Store(true)
	c.nc.Close()
	c.markClosed()
}

// Run hands every received message to handle, one at a time, in wire
// order: on the calling goroutine, or, for a message that arrives while
// Run waits with nothing queued, on the Conn's own that takes it in
// (queue.go), as Run would. Chunked messages are reassembled first.
// It returns ctx.Err() when ctx is done, or ErrClosed once the connection
// is gone and every message received before that was handled; handle is
// not called once Run returned.
func (c *Conn) Run(ctx context.Context, handle func(Message)) error {
	q := c.queue
	q.handling.Lock()
	q.inline = func(m *nats.Msg) { c.deliver(m, handle) }
	q.handling.Unlock()
	defer func() {
		q.handling.Lock()
		q.inline = nil
		q.handling.Unlock()
	}()
	expiry := time.NewTicker(PartialTTL / 4)
	defer expiry.Stop()
	batch := make([]*nats.Msg, 0, 256)
	// handleQueued handles what the ring holds, a batch at a time, and
	// says whether there was any.
	handleQueued := func() bool {
		q.handling.Lock()
		defer q.handling.Unlock()
		if batch = q.take(batch[:0]); len(batch) == 0 {
			return false
		}
		for _, m := range batch {
			c.deliver(m, handle)
		}
		clear(batch)
		return true
	}
	expire := func(now time.Time) {
		q.handling.Lock()
		c.expire(now)
		q.handling.Unlock()
	}
	for {
		if handleQueued() {
			// Under load, take what is queued without the cost of a full
			// select each time; check ctx between bursts.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case now := <-expiry.C:
				expire(now)
			default:
			}
			continue
		}
		select {
		case <-q.ready:
		case now := <-expiry.C:
			expire(now)
		case <-ctx.Done():
			return ctx.Err()
		case <-q.pumped:
			// Closed, and everything received is in the ring (or was
			// handled inline).
			for handleQueued() {
			}
			return ErrClosed
		}
	}
}

func (c *Conn) expire(now time.Time) {
	if len(c.partials) > 0 {
		c.expirePartials(now)
	}
}

func (c *Conn) deliver(m *nats.Msg, handle func(Message)) {
	if m.Header == nil {
		handle(Message{Subject: m.Subject, Data: m.Data})
		return
	}
	if n := m.Header.Get(batchHeader); n != "" {
		c.unbatch(m, n, handle)
		return
	}
	if v := m.Header.Get(chunkHeader); v != "" {
		if whole := c.reassemble(m, v); whole != nil {
			handle(Message{Subject: m.Subject, Data: whole})
		}
		return
	}
	c.drop(DropHeader, m.Subject, "NATS headers of neither a batch nor a chunk (%d keys)", len(m.Header))
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return ErrClosed
	case errors.Is(err, nats.ErrReconnectBufExceeded):
		return ErrNotSent
	default:
		return err
	}
}
