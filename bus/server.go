package bus

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

const (
	// DefaultMaxPayload is the largest message the server takes in one
	// piece: 8 MiB (NATS' own default is 1 MiB). Larger messages are split
	// by Publish.
	DefaultMaxPayload = 8 << 20
	// DefaultMaxPending is how many bytes the server buffers for one slow
	// reader before it cuts that reader off: 512 MiB.
	DefaultMaxPending = 512 << 20
	// startTimeout bounds how long StartServer waits for the listener.
	startTimeout = 10 * time.Second
)

// ServerOptions configures StartServer. The zero value is a loopback-only
// server on a random port with a random token.
type ServerOptions struct {
	// Host is the address to listen on. Default "127.0.0.1": nothing off
	// this machine can reach the bus unless asked for.
	Host string
	// Port to listen on; 0 picks a free one.
	Port int
	// Token every connection must present. Empty: a fresh NewToken.
	Token string
	// MaxPayload is the largest single message, in bytes. Default
	// DefaultMaxPayload; at most 64 MiB.
	MaxPayload int
	// MaxPending is the per-connection outbound buffer of the server before
	// it declares that reader slow and disconnects it. Default
	// DefaultMaxPending.
	MaxPending int64
	// NoListen starts a server that takes in-process connections only.
	NoListen bool
	// TLS, when set, makes every TCP connection use TLS (see ServerTLS).
	TLS *ServerTLS
	// Leaves, when set, makes the server a hub: it accepts leaf nodes
	// (StartLeaf) there. A leaf presents the token, and uses TLS when the
	// server does. See LeafURL.
	Leaves *Listen
	// Cluster, when set, makes the server one of a cluster of servers
	// joined by routes, which together act as one hub: a subscriber on any
	// of them, or on a leaf of any of them, gets what is published on any
	// other. Routes present the token and, like leaves, use TLS when the
	// server does.
	Cluster *Cluster
}

// Listen is where a server listens for other servers (leaf nodes,
// routes), and what they dial.
type Listen struct {
	// Host to listen on. Default ServerOptions.Host.
	Host string
	// Port to listen on; 0 picks a free one.
	Port int
	// Advertise is the host (or host:port) the other servers dial.
	// Default Host, or 127.0.0.1 when Host is 0.0.0.0 or ::.
	Advertise string
}

// Cluster is a server's place in a cluster of hub servers.
type Cluster struct {
	// Name is the cluster's: every server of it gives the same. Default
	// "monarch".
	Name string
	// Listen is where the server takes routes from the other servers.
	Listen
	// Routes are the route URLs (RouteURL) of servers already running to
	// join; the servers then find each other. None: this server is the
	// first, which others join.
	Routes []string
}

// Server is an embedded NATS server. It is safe for concurrent use.
type Server struct {
	ns    *server.Server
	opts  *server.Options
	token string
	host  string
	once  sync.Once

	leafURL, routeURL string        // "" unless the server listens for them
	probe             *nats.Conn    // a hub's: answers leaves' probes
	log               *serverLog    // what the server reports
	watchEnd          chan struct{} // a leaf's: closed to stop the link watch
	watchDone         chan struct{}
}

// StartServer starts an embedded server and waits until it accepts
// connections. With o.Cluster.Routes it does not wait for the routes:
// see AwaitRoutes.
func StartServer(o ServerOptions) (*Server, error) {
	opts, err := serverOptions(&o)
	if err != nil {
		return nil, err
	}
	s, err := start(opts, &o)
	if err != nil {
		return nil, err
	}
	if o.Leaves != nil || o.Cluster != nil {
		if err := s.startProbe(); err != nil {
			s.Shutdown()
			return nil, err
		}
	}
	return s, nil
}

// serverOptions checks o, fills in its defaults and returns the NATS
// server's options.
func serverOptions(o *ServerOptions) (*server.Options, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Token == "" {
		o.Token = NewToken()
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.MaxPayload < 1024 || o.MaxPayload > 64<<20 {
		return nil, fmt.Errorf("bus: max payload %d out of range [1 KiB, 64 MiB]", o.MaxPayload)
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxPending < int64(o.MaxPayload) {
		return nil, fmt.Errorf("bus: max pending %d is below max payload %d", o.MaxPending, o.MaxPayload)
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("bus: port %d out of range", o.Port)
	}
	port := o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		Host:          o.Host,
		Port:          port,
		Authorization: o.Token,
		MaxPayload:    int32(o.MaxPayload),
		MaxPending:    o.MaxPending,
		DontListen:    o.NoListen,
		NoLog:         true,
		NoSigs:        true,
		// No HTTP monitor, no JetStream: a plain core-NATS bus.
		HTTPPort: 0,
		// What is kept of closed connections is for the monitor, which
		// is off: NATS's default of 10,000 is a ring of them made at
		// start, 190 KB a server, with a server a host in one test
		// process (actorrt/actortest).
		MaxClosedClients: 16,
	}
	var clientTLS, leafTLS, routeTLS *tls.Config
	if o.TLS != nil {
		var err error
		if clientTLS, leafTLS, routeTLS, err = o.TLS.configs(); err != nil {
			return nil, fmt.Errorf("bus: %w", err)
		}
		opts.TLS, opts.TLSTimeout = true, 5
		opts.TLSConfig = clientTLS
	}
	if l := o.Leaves; l != nil {
		host, port, err := listenOn(l, o.Host, "leaf")
		if err != nil {
			return nil, err
		}
		// A lone hub does not advertise its leaf address: a leaf adds an
		// advertised address before the one it was given and dials it
		// first when it relinks, which would take it around the path it
		// was told (a tunnel, a proxy, another interface) to the same
		// server. Servers of a cluster advertise, so a leaf can move to
		// another.
		opts.LeafNode = server.LeafNodeOpts{Host: host, Port: port, Advertise: l.Advertise, NoAdvertise: o.Cluster == nil,
			Username: serverUser, Password: o.Token, TLSConfig: leafTLS, TLSTimeout: 5, Compression: noCompression}
	}
	if c := o.Cluster; c != nil {
		host, port, err := listenOn(&c.Listen, o.Host, "route")
		if err != nil {
			return nil, err
		}
		name := c.Name
		if name == "" {
			name = "monarch"
		}
		routes, err := serverURLs(c.Routes, "route", o.Token)
		if err != nil {
			return nil, err
		}
		opts.Cluster = server.ClusterOpts{Name: name, Host: host, Port: port, Advertise: c.Advertise,
			Username: serverUser, Password: o.Token, TLSConfig: routeTLS, TLSTimeout: 5, Compression: noCompression,
			PingInterval: routePing, MaxPingsOut: routeMaxPingsOut}
		// The servers of a hub tell each other's clients where else to
		// connect (a Conn that loses its server moves to another), unless
		// this one takes clients on loopback only while its routes cross
		// hosts: its address would name the other clients' own machine.
		routeHost := c.Advertise
		if routeHost == "" {
			routeHost = host
		}
		if h, _, err := net.SplitHostPort(routeHost); err == nil {
			routeHost = h
		}
		opts.Cluster.NoAdvertise = loopback(o.Host) && !loopback(routeHost)
		opts.Routes = routes
	}
	return opts, nil
}

// Route loss. A server whose process ends resets its routes: its peers
// drop them at once. One whose host goes silent (hung, powered off, cut
// off) answers no pings: its peers ping each route every routePing and
// drop it once routeMaxPingsOut are unanswered, within RouteStale.
// (NATS's own default, a ping each 30 s and two unanswered, takes 90 s,
// during which the hub's probes, hubsync.go, would wait on a dead server
// and its leaves could not move: see leafsilence.go.) A pong waits
// behind what the peer sends first; between hub servers, which read
// their routes on goroutines of their own, seconds of backlog are not
// expected, and a route dropped under one is dialled again at once, what
// was on it resent by the runtime's delivery layer.
const (
	routePing        = 500 * time.Millisecond
	routeMaxPingsOut = 3
	// RouteStale bounds how long a hub server keeps a route to a server
	// that went silent.
	RouteStale = routePing * (routeMaxPingsOut + 1)
)

// loopback: host is a loopback address (or localhost).
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// noCompression: links between servers carry messages as they are. NATS
// would otherwise compress a link whose round trip grows past 10 ms (a
// loaded host, say), spending CPU where a job needs it.
var noCompression = server.CompressionOpts{Mode: server.CompressionOff}

// serverUser is the user name servers of a bus present to each other,
// with the token as the password.
const serverUser = "monarch"

// listenOn is the host and port (RANDOM_PORT for 0) a server listens on
// for other servers.
func listenOn(l *Listen, host, what string) (string, int, error) {
	if l.Port < 0 || l.Port > 65535 {
		return "", 0, fmt.Errorf("bus: %s port %d out of range", what, l.Port)
	}
	if l.Host != "" {
		host = l.Host
	}
	if l.Port == 0 {
		return host, server.RANDOM_PORT, nil
	}
	return host, l.Port, nil
}

// serverURLs parses the URLs of other servers, adding the credentials.
func serverURLs(urls []string, what, token string) ([]*url.URL, error) {
	out := make([]*url.URL, 0, len(urls))
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Port() == "" {
			return nil, fmt.Errorf("bus: %s URL %q: want scheme://host:port", what, s)
		}
		u.User = url.UserPassword(serverUser, token)
		out = append(out, u)
	}
	return out, nil
}

// start starts a server with opts and waits until it accepts connections.
func start(opts *server.Options, o *ServerOptions) (*Server, error) {
	where := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: start server on %s: %w", where, err)
	}
	log := &serverLog{}
	ns.SetLogger(log, false, false)
	// Start returns once the client and leaf listeners are open (routes
	// listen on a goroutine of their own): ready is then at once.
	ns.Start()
	if !ns.ReadyForConnections(startTimeout) {
		ns.Shutdown()
		if cause := log.last(); cause != nil {
			return nil, fmt.Errorf("bus: server on %s: %w", where, cause)
		}
		return nil, fmt.Errorf("bus: server on %s not ready within %s", where, startTimeout)
	}
	s := &Server{ns: ns, opts: opts, token: o.Token, host: o.Host, log: log}
	// The server wrote the ports it picked back into opts; ready means
	// they are there.
	if l := o.Leaves; l != nil {
		s.leafURL = serverURL("nats-leaf", l.Advertise, opts.LeafNode.Host, opts.LeafNode.Port)
	}
	if c := o.Cluster; c != nil {
		s.routeURL = serverURL("nats-route", c.Advertise, opts.Cluster.Host, opts.Cluster.Port)
	}
	return s, nil
}

// serverURL is what other servers dial: advertise (host, or host:port),
// else the listen host (127.0.0.1 for any address) with port.
func serverURL(scheme, advertise, host string, port int) string {
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err == nil {
			return scheme + "://" + advertise
		}
		host = advertise
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// URL is the address TCP clients dial, as nats://host:port. For a server
// started with NoListen it is empty.
func (s *Server) URL() string {
	if s.ns.Addr() == nil {
		return ""
	}
	return s.ns.ClientURL()
}

// Port is the TCP port the server listens on (0 with NoListen).
func (s *Server) Port() int {
	if a, ok := s.ns.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Token is the secret every connection presents.
func (s *Server) Token() string { return s.token }

// NumClients is the number of client connections the server holds now
// (a hub's own probe among them).
func (s *Server) NumClients() int { return s.ns.NumClients() }

// LeafURL is the URL leaf nodes dial (nats-leaf://host:port, the
// advertised host), for a server started with Leaves; else "".
func (s *Server) LeafURL() string { return s.leafURL }

// RouteURL is the URL other servers of its cluster dial
// (nats-route://host:port, the advertised host), for a server started
// with Cluster; else "".
func (s *Server) RouteURL() string { return s.routeURL }

// Interest is what a server knows of the bus's subscriptions.
type Interest struct {
	// Subs is every subscription the server holds: its clients', and
	// those its leaves and routes announced to it.
	Subs int
	// OverLeaves is those announced to it over leaf links: on a hub, its
	// leaves' interest; on a leaf, the rest of the bus's, as the hub told
	// it.
	OverLeaves int
	// Told is, on a hub, how many subscriptions it has told its leaves
	// of, in all: each leaf learns of every subject a client or another
	// leaf subscribes to, once a subject. What the leaves hold of the
	// rest of the bus, and what they took one update each to learn.
	Told int
	// Under is how many of its connections' subscriptions are to
	// subjects that start with the prefix asked for; UnderSubjects those
	// subjects.
	Under         int
	UnderSubjects []string
}

// Interest counts the subscriptions the server knows of (see Interest),
// those to subjects under prefix among them. It walks every connection's
// subscriptions: a measure, not for a hot path.
func (s *Server) Interest(prefix string) Interest {
	in := Interest{Subs: int(s.ns.NumSubscriptions())}
	if lz, err := s.ns.Leafz(nil); err == nil {
		for _, l := range lz.Leafs {
			in.OverLeaves += int(l.NumSubs)
		}
	}
	cz, err := s.ns.Connz(&server.ConnzOptions{Subscriptions: true, Limit: 1 << 30})
	if err != nil {
		return in
	}
	holders := map[string]int{}
	for _, c := range cz.Conns {
		for _, sub := range c.Subs {
			holders[sub]++
			if prefix != "" && strings.HasPrefix(sub, prefix) {
				in.Under++
				in.UnderSubjects = append(in.UnderSubjects, sub)
			}
		}
	}
	for _, c := range cz.Conns {
		if c.Kind != "Leafnode" {
			continue
		}
		own := 0
		for _, sub := range c.Subs {
			if holders[sub] == 1 {
				own++
			}
		}
		in.Told += len(holders) - own
	}
	return in
}

// NumLeafNodes is the number of leaf node connections the server holds:
// at a hub, the leaves attached to it; at a leaf, 1 while it is linked to
// its hub.
func (s *Server) NumLeafNodes() int { return s.ns.NumLeafNodes() }

// NumRoutes is the number of other servers of its cluster the server is
// linked to (by one route connection or several).
func (s *Server) NumRoutes() int { return s.ns.NumRemotes() }

// AwaitRoutes waits until the server is linked to at least n other
// servers of its cluster. If ctx ends first it fails with the last
// problem the server reported (an address it cannot reach, credentials
// refused).
func (s *Server) AwaitRoutes(ctx context.Context, n int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for s.ns.NumRemotes() < n {
		select {
		case <-t.C:
		case <-ctx.Done():
			cause := s.log.last()
			if cause == nil {
				cause = ctx.Err()
			}
			return fmt.Errorf("bus: linked to %d of %d servers of the cluster (joined at %v): %w", s.ns.NumRemotes(), n, redactAll(s.opts.Routes), cause)
		}
	}
	return nil
}

// Shutdown stops the server and closes every connection. Idempotent.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		if s.watchEnd != nil {
			close(s.watchEnd)
			<-s.watchDone
		}
		if s.probe != nil {
			s.probe.Close()
		}
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}

// NewToken returns a fresh random job secret (26 base32 characters, 130
// bits).
func NewToken() string { return rand.Text() }

// InProcessConn opens a connection to the server without TCP. It makes a
// Server a nats.InProcessConnProvider, for code (benchmarks, tools) that
// wants a raw nats.go connection beside the bus's own.
func (s *Server) InProcessConn() (net.Conn, error) { return s.ns.InProcessConn() }

// redactAll names route URLs by address, without credentials.
func redactAll(urls []*url.URL) string {
	hosts := make([]string, len(urls))
	for i, u := range urls {
		hosts[i] = u.Host
	}
	return strings.Join(hosts, ", ")
}

// serverLog keeps the last problem an embedded server reported (errors,
// warnings, a closed link), for the errors of the calls that wait on it.
// Everything else is dropped: the bus has no log of its own.
type serverLog struct {
	mu      sync.Mutex
	problem string
	errAt   time.Time // when the last error or warning came
}

// keep records a problem. A closed link (a notice) says less than the
// error that usually comes with it: it does not replace one just made.
func (l *serverLog) keep(notice bool, format string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if notice && now.Sub(l.errAt) < 2*time.Second {
		return
	}
	if !notice {
		l.errAt = now
	}
	l.problem = fmt.Sprintf(format, args...)
}

// last is the last problem reported, nil if none.
func (l *serverLog) last() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.problem == "" {
		return nil
	}
	return errors.New(l.problem)
}

func (l *serverLog) Noticef(format string, args ...any) {
	if strings.Contains(format, "connection closed") {
		l.keep(true, format, args)
	}
}
func (l *serverLog) Warnf(format string, args ...any)  { l.keep(false, format, args) }
func (l *serverLog) Fatalf(format string, args ...any) { l.keep(false, format, args) }
func (l *serverLog) Errorf(format string, args ...any) { l.keep(false, format, args) }
func (l *serverLog) Debugf(string, ...any)             {}
func (l *serverLog) Tracef(string, ...any)             {}
