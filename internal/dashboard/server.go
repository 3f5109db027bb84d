package dashboard

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/logagg"
)

// Job is what the dashboard shows: a running job, as its client sees it.
// Its methods are called from many requests at once.
type Job interface {
	// State is a snapshot of the job now, fresh figures included (their
	// wait bounded by ctx).
	State(ctx context.Context) (*jobctl.JobState, error)
	// Stacks answers a stacks request as `monarch stacks` is answered.
	Stacks(ctx context.Context, req jobctl.StacksRequest) (*jobctl.StacksAnswer, error)
	// Logs replays the job's log through emit, oldest first, passing only
	// the lines that match f, until its end or ctx's; an error from emit
	// stops it and is returned.
	Logs(ctx context.Context, f logagg.Filter, emit func(logagg.Line) error) error
}

// Options configure a dashboard.
type Options struct {
	// Addr is where it listens, host:port; "": DefaultAddr (loopback, a
	// free port).
	Addr string
	// Token is the job's secret (NewToken), which every request needs;
	// required, at least MinToken bytes.
	Token string
	// Job is the job shown; required.
	Job Job
	// Metrics, when set, is served at /metrics, behind the same access
	// check as the rest.
	Metrics http.Handler
}

// Defaults and bounds.
const (
	// DefaultAddr is Options.Addr unless told: a free loopback port.
	DefaultAddr = "127.0.0.1:0"
	// MinToken is the shortest token taken.
	MinToken = 16
	// Interval is the least time between two states of the event stream.
	Interval = time.Second
	// MaxStreams bounds the event streams served at once.
	MaxStreams = 16
	// MaxHeavy bounds the stack and log requests served at once.
	MaxHeavy = 4
	// StateTimeout bounds the wait for one state.
	StateTimeout = 5 * time.Second
	// StacksTimeout is how long the procs have to give their stacks.
	StacksTimeout = 5 * time.Second
	// LogsTimeout bounds a read of the job's log.
	LogsTimeout = 10 * time.Second
	// DefaultLogLines and MaxLogLines: the lines /api/logs answers with,
	// unless told, and at most.
	DefaultLogLines = 200
	MaxLogLines     = 2000
)

// Errors of Start.
var (
	ErrNoToken = errors.New("dashboard: a token of at least 16 bytes is required")
	ErrNoJob   = errors.New("dashboard: no job to show")
)

// NewToken makes a job's secret: 32 random bytes, in hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dashboard: token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

//go:embed page.html
var page []byte

// Server is a running dashboard.
type Server struct {
	o       Options
	srv     *http.Server
	ln      net.Listener
	url     string
	prefix  string // the page's path, "/" and 32 random hex digits
	cookie  string // its cookie's name
	session string // and value

	ctx     context.Context // ends the event streams at Close
	cancel  context.CancelFunc
	streams chan struct{} // a slot per event stream served
	heavy   chan struct{} // a slot per stacks or logs request served
	done    chan struct{} // closed when Serve has returned

	closeOnce sync.Once
}

// Start listens on o.Addr and serves the dashboard until Close. Its error
// wraps the listener's (errors.Is syscall.EADDRINUSE for an address
// taken).
func Start(o Options) (*Server, error) {
	if len(o.Token) < MinToken {
		return nil, ErrNoToken
	}
	if o.Job == nil {
		return nil, ErrNoJob
	}
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	prefix, err := newPrefix()
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{o: o, ln: ln, prefix: prefix, streams: make(chan struct{}, MaxStreams), heavy: make(chan struct{}, MaxHeavy), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	s.cookie, s.session = "monarch_dashboard_"+port, session(o.Token, port)
	s.url = "http://" + net.JoinHostPort(urlHost(ln.Addr().(*net.TCPAddr).IP), port) + prefix + "/?token=" + url.QueryEscape(o.Token)
	s.srv = &http.Server{
		Handler:           s.access(s.routes()),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second, // the event stream sets its own, write by write
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          log.New(io.Discard, "", 0), // not on the program's stderr
	}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return s, nil
}

// urlHost is the host a URL of a server listening on ip names: ip, or
// for every interface, this host's name.
func urlHost(ip net.IP) string {
	if ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			return h
		}
	}
	return ip.String()
}

// URL is the dashboard's address with the token: what to open.
func (s *Server) URL() string { return s.url }

// Addr is the address the dashboard listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the dashboard: the event streams end, the requests under
// way have a few seconds to end, then their connections are closed. It
// waits for the server, is idempotent and returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
		<-s.done
	})
	return nil
}

// routes are the dashboard's paths, behind access.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.servePage)
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.HandleFunc("GET /api/state", s.serveState)
	mux.HandleFunc("GET /api/stacks", s.serveStacks)
	mux.HandleFunc("GET /api/logs", s.serveLogs)
	if s.o.Metrics != nil {
		mux.Handle("/metrics", s.o.Metrics)
	}
	return mux
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(page)
}

// slot takes one of sem's slots, or answers 503 and reports false.
func slot(w http.ResponseWriter, sem chan struct{}, what string) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
		http.Error(w, fmt.Sprintf("monarch: too many %s served at once (at most %d): try again", what, cap(sem)), http.StatusServiceUnavailable)
		return false
	}
}
