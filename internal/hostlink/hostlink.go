package hostlink

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/door"
)

// DefaultTimeout is how long a link may go unanswered by the agent's
// kernel before the watcher's kernel drops it.
const DefaultTimeout = 3 * time.Second

// MinTimeout is the least Timeout: keepalive counts in whole seconds, and
// takes one idle second and two probes.
const MinTimeout = 3 * time.Second

// handshakeWait bounds each side's wait for the other's handshake, TLS
// and MUNGE included.
const handshakeWait = 10 * time.Second

// Event is a change of an agent's link.
type Event struct {
	Agent string
	Up    bool
	Cause string // why it went down
}

// Watcher accepts agents' links and reports their changes.
type Watcher struct {
	ln      net.Listener
	token   string
	timeout time.Duration
	onEvent func(Event)
	validID func(string) bool
	tls     *tls.Config
	job     string
	unmunge func(ctx context.Context, cred []byte) (uint32, []byte, error)
	certify func(agent string, pub crypto.PublicKey, names []string) ([]byte, error)
	uid     uint32     // the uid a MUNGE proof must be of: ours
	door    *door.Door // the peers not yet proven
	decodes *decodes
	ctx     context.Context
	stop    context.CancelFunc

	mu     sync.Mutex
	conns  map[string]net.Conn // agent -> its current link (the TCP conn)
	closed bool
	wg     sync.WaitGroup
}

// WatcherOptions configures Listen.
type WatcherOptions struct {
	// Host is the address to listen on ("" or "127.0.0.1": loopback).
	Host string
	// Token is the job's secret, which agents prove they hold or, proven
	// by MUNGE, receive.
	Token string
	// Timeout bounds how long a link may go unanswered (DefaultTimeout
	// when zero; at least MinTimeout).
	Timeout time.Duration
	// OnEvent hears of every link up and down, in order per agent, from
	// the watcher's goroutines: it must not block for long.
	OnEvent func(Event)
	// ValidID tells whether an agent's id is acceptable.
	ValidID func(string) bool
	// TLS is the server side of every link (its certificate, the job
	// CA's); nil: plain TCP, on which MUNGE proofs are refused.
	TLS *tls.Config
	// Job is the job's id, which a MUNGE proof's payload must name.
	Job string
	// Unmunge decodes a MUNGE credential (internal/munge's Decode) and
	// returns its maker's uid and its payload; nil: MUNGE proofs refused.
	Unmunge func(ctx context.Context, cred []byte) (uid uint32, payload []byte, err error)
	// Certify certifies a proven agent's public key for names (its host
	// names and addresses) and returns the certificate, PEM-encoded
	// (jobca's Sign); nil: certificate requests refused.
	Certify func(agent string, pub crypto.PublicKey, names []string) (certPEM []byte, err error)
}

// Listen starts a watcher on a random port of o.Host.
func Listen(o WatcherOptions) (*Watcher, error) {
	if o.Token == "" || o.OnEvent == nil || o.ValidID == nil {
		return nil, errors.New("hostlink: a watcher needs the token, OnEvent and ValidID")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < MinTimeout {
		return nil, fmt.Errorf("hostlink: timeout %v is under %v", o.Timeout, MinTimeout)
	}
	if o.Unmunge != nil && (o.Job == "" || strings.ContainsAny(o.Job, " \t\n")) {
		return nil, fmt.Errorf("hostlink: MUNGE proofs need the job's id (%q)", o.Job)
	}
	if o.TLS != nil && len(o.TLS.Certificates) == 0 && o.TLS.GetCertificate == nil && o.TLS.GetConfigForClient == nil {
		return nil, errors.New("hostlink: a TLS watcher needs a certificate")
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	// No keepalive on accepted conns yet: a peer refused at once costs
	// no setsockopt; an admitted link gets its own (keep).
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("hostlink: listen: %w", err)
	}
	w := &Watcher{ln: ln, token: o.Token, timeout: o.Timeout, onEvent: o.OnEvent, validID: o.ValidID,
		job: o.Job, unmunge: o.Unmunge, certify: o.Certify, uid: uint32(os.Getuid()),
		decodes: newDecodes(), conns: map[string]net.Conn{}}
	if o.TLS != nil {
		w.tls = o.TLS.Clone()
	}
	w.door, err = door.New(door.Config{Name: "hostlink: the link watcher at " + ln.Addr().String(), Limits: doorLimits, Serve: w.serve})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("hostlink: %w", err)
	}
	w.ctx, w.stop = context.WithCancel(context.Background())
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.door.Serve(ln) // until Close closes ln; then every serve has returned
	}()
	return w, nil
}

// Port is the port the watcher listens on.
func (w *Watcher) Port() int { return w.ln.Addr().(*net.TCPAddr).Port }

// Close stops the watcher and drops every link (reporting none of them).
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closed = true
	for _, c := range w.conns {
		c.Close()
	}
	w.mu.Unlock()
	w.stop()
	w.ln.Close()
	w.wg.Wait()
}

// serve runs one link, which its door found readable: the handshake,
// then a read that returns only when the link is gone.
func (w *Watcher) serve(c *door.Conn) {
	agent, err := w.admit(w.ctx, c, c.Source())
	if err != nil || !c.Through() {
		return // an agent of another job, a port scanner: not an event; the door closes it
	}
	raw := c.Conn
	// Keepalive and the user timeout are the TCP conn's, under TLS too.
	if err := keep(raw, w.timeout); err != nil {
		raw.Close()
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		raw.Close()
		return
	}
	if old := w.conns[agent]; old != nil {
		old.Close() // superseded: the agent dialed again
	}
	w.conns[agent] = raw
	w.mu.Unlock()
	w.onEvent(Event{Agent: agent, Up: true})

	// Nothing is sent on a link after the handshake, TLS or not: a read
	// of the TCP conn returns at its end only.
	var b [64]byte
	_, err = raw.Read(b[:])
	for err == nil {
		_, err = raw.Read(b[:])
	}
	w.mu.Lock()
	current := w.conns[agent] == raw
	if current {
		delete(w.conns, agent)
	}
	closed := w.closed
	w.mu.Unlock()
	raw.Close()
	if current && !closed {
		w.onEvent(Event{Agent: agent, Cause: cause(err)})
	}
}

// admit runs the handshake on raw, a peer from src, until ctx ends (see
// the package doc), and returns the agent id it proves. A peer refused
// after its hello hears why.
func (w *Watcher) admit(ctx context.Context, raw net.Conn, src netip.Prefix) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeWait)
	defer cancel()
	// The proof comes first, and soon: until it does, the peer has only
	// its TLS handshake (or its greeting), a challenge and a bounded
	// line, under the door's deadline (helloWait after its first byte).
	defer raw.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) }) // Close ends it
	defer stop()
	c := raw
	var binding []byte
	if w.tls == nil {
		if err := readGreeting(raw); err != nil {
			return "", err
		}
	} else {
		tc := tls.Server(raw, w.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return "", err
		}
		var err error
		if binding, err = exportBinding(tc); err != nil {
			return "", err
		}
		c = tc
	}
	challenge := make([]byte, challengeLen)
	rand.Read(challenge)
	if _, err := c.Write(challenge); err != nil {
		return "", err
	}
	refuse := func(err error) (string, error) {
		io.WriteString(c, formatAnswer(answer{err: err.Error()}))
		return "", err
	}
	r := bufio.NewReaderSize(io.LimitReader(c, maxHello+maxRequest), 1024)
	line, err := readLine(r, maxHello)
	if err != nil {
		return "", err
	}
	h, err := parseHello(line, w.validID)
	if err != nil {
		return refuse(err)
	}
	// Proven or refused within the handshake's bound; a cancel (Close,
	// an eviction) that came first is not undone.
	deadline, _ := ctx.Deadline()
	raw.SetDeadline(deadline)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err := w.prove(ctx, h, challenge, binding, src); err != nil {
		return refuse(err)
	}
	if line, err = readLine(r, maxRequest); err != nil {
		return "", err
	}
	req, err := parseRequest(line)
	if err != nil {
		return refuse(err)
	}
	var a answer
	if h.cred != nil {
		a.token = w.token // what it was admitted for
	}
	if req.key != nil {
		if w.certify == nil {
			return refuse(errors.New("certificate refused: this link watcher issues none"))
		}
		if a.cert, err = w.certify(h.agent, req.key, req.names); err != nil {
			return refuse(fmt.Errorf("certificate refused: %v", err))
		}
	}
	if !stop() {
		return "", ctx.Err() // its deadline, in the past, may follow ours
	}
	if _, err := io.WriteString(c, formatAnswer(a)); err != nil {
		return "", err
	}
	return h.agent, nil
}

// prove checks h's proof for challenge: an HMAC under the job's token, or
// (over TLS only) a MUNGE credential of our uid for this job, agent,
// challenge and TLS session (binding). Whatever the cheap checks refuse
// is never decoded; src decodes one credential at a time, so that no
// source takes the decodes the others need.
func (w *Watcher) prove(ctx context.Context, h hello, challenge, binding []byte, src netip.Prefix) error {
	if h.cred == nil {
		if !hmac.Equal(h.mac, sum(w.token, challenge, h.agent)) {
			return errors.New("wrong proof (not this job's token)")
		}
		return nil
	}
	switch {
	case w.tls == nil || binding == nil:
		return errors.New("a MUNGE proof is taken over TLS only")
	case w.unmunge == nil:
		return errors.New("this link watcher takes no MUNGE proof")
	}
	want := mungePayload(w.job, h.agent, challenge, binding)
	if err := plausible(h.cred, len(want)); err != nil {
		return fmt.Errorf("MUNGE credential: %v", err)
	}
	wait, cancel := context.WithTimeout(ctx, decodeWait)
	defer cancel()
	release, err := w.decodes.take(wait, src, func() bool { return w.door.Penalized(src) })
	if err != nil {
		return err
	}
	defer release()
	uid, payload, err := w.unmunge(ctx, h.cred)
	if err != nil {
		return fmt.Errorf("MUNGE credential: %v", err)
	}
	if uid != w.uid {
		return fmt.Errorf("a MUNGE credential of uid %d, not the job's (%d)", uid, w.uid)
	}
	if !bytes.Equal(payload, want) {
		return errors.New("a MUNGE credential made for another job, agent, challenge or TLS session")
	}
	return nil
}

// keep sets c's kernel to probe the peer when idle and drop c after
// timeout without an answer, to data or to probes.
func keep(c net.Conn, timeout time.Duration) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	// One idle second, then probes each (timeout-1s)/2: two unanswered
	// probes drop it at about timeout.
	interval := max((timeout-time.Second)/2, time.Second)
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: interval, Count: 2}); err != nil {
		return err
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(timeout.Milliseconds()))
	})
	return errors.Join(err, serr)
}

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT.
const tcpUserTimeout = 0x12

// cause says why a link's read ended.
func cause(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return "closed by the agent's host (its process ended)"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset by the agent's host (its process ended)"
	case errors.Is(err, syscall.ETIMEDOUT):
		return "no answer from the agent's host (host down or link cut)"
	}
	return err.Error()
}
