package bus

import (
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	// TLSCert and TLSKey (PEM files), when set, make every TCP connection
	// use TLS with this certificate.
	TLSCert, TLSKey string
}

// Server is an embedded NATS server. It is safe for concurrent use.
type Server struct {
	ns    *server.Server
	token string
	host  string
	once  sync.Once
}

// StartServer starts an embedded server and waits until it accepts
// connections.
func StartServer(o ServerOptions) (*Server, error) {
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
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("bus: TLS certificate %s, key %s: %w", o.TLSCert, o.TLSKey, err)
		}
		opts.TLS, opts.TLSTimeout = true, 5
		opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: start server on %s: %w", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(startTimeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("bus: server on %s not ready within %s", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), startTimeout)
	}
	return &Server{ns: ns, token: o.Token, host: o.Host}, nil
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

// NumClients is the number of connections the server holds now.
func (s *Server) NumClients() int { return s.ns.NumClients() }

// Shutdown stops the server and closes every connection. Idempotent.
func (s *Server) Shutdown() {
	s.once.Do(func() {
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
