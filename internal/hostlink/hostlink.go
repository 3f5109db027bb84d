package hostlink

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultTimeout is how long a link may go unanswered by the agent's
// kernel before the watcher's kernel drops it.
const DefaultTimeout = 3 * time.Second

// MinTimeout is the least Timeout: keepalive counts in whole seconds, and
// takes one idle second and two probes.
const MinTimeout = 3 * time.Second

// handshakeWait bounds each side's wait for the other's handshake.
const handshakeWait = 10 * time.Second

const (
	challengeLen = 16
	maxHello     = 512 // an id and an HMAC, with room
)

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

	mu     sync.Mutex
	conns  map[string]net.Conn // agent -> its current link
	closed bool
	wg     sync.WaitGroup
}

// WatcherOptions configures Listen.
type WatcherOptions struct {
	// Host is the address to listen on ("" or "127.0.0.1": loopback).
	Host string
	// Token is the job's secret, which agents prove they hold.
	Token string
	// Timeout bounds how long a link may go unanswered (DefaultTimeout
	// when zero; at least MinTimeout).
	Timeout time.Duration
	// OnEvent hears of every link up and down, in order per agent, from
	// the watcher's goroutines: it must not block for long.
	OnEvent func(Event)
	// ValidID tells whether an agent's id is acceptable.
	ValidID func(string) bool
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
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("hostlink: listen: %w", err)
	}
	w := &Watcher{ln: ln, token: o.Token, timeout: o.Timeout, onEvent: o.OnEvent, validID: o.ValidID, conns: map[string]net.Conn{}}
	w.wg.Add(1)
	go w.accept()
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
	w.ln.Close()
	w.wg.Wait()
}

func (w *Watcher) accept() {
	defer w.wg.Done()
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.serve(c)
		}()
	}
}

// serve runs one link: the handshake, then a read that returns only when
// the link is gone.
func (w *Watcher) serve(c net.Conn) {
	agent, err := w.handshake(c)
	if err != nil {
		c.Close() // an agent of another job, a port scanner: not an event
		return
	}
	if err := keep(c, w.timeout); err != nil {
		c.Close()
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		c.Close()
		return
	}
	if old := w.conns[agent]; old != nil {
		old.Close() // superseded: the agent dialed again
	}
	w.conns[agent] = c
	w.mu.Unlock()
	w.onEvent(Event{Agent: agent, Up: true})

	// Nothing is sent on a link: a read returns at its end only.
	var b [64]byte
	_, err = c.Read(b[:])
	for err == nil {
		_, err = c.Read(b[:])
	}
	w.mu.Lock()
	current := w.conns[agent] == c
	if current {
		delete(w.conns, agent)
	}
	closed := w.closed
	w.mu.Unlock()
	c.Close()
	if current && !closed {
		w.onEvent(Event{Agent: agent, Cause: cause(err)})
	}
}

// handshake challenges c and returns the agent id it proves.
func (w *Watcher) handshake(c net.Conn) (string, error) {
	c.SetDeadline(time.Now().Add(handshakeWait))
	defer c.SetDeadline(time.Time{})
	challenge := make([]byte, challengeLen)
	rand.Read(challenge)
	if _, err := c.Write(challenge); err != nil {
		return "", err
	}
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxHello), maxHello).ReadString('\n')
	if err != nil {
		return "", err
	}
	agent, mac, err := parseHello(line, w.validID)
	if err != nil {
		return "", err
	}
	if !hmac.Equal(mac, sum(w.token, challenge, agent)) {
		return "", errors.New("hostlink: wrong proof")
	}
	return agent, nil
}

// parseHello reads an agent's hello: "<id> <hex HMAC>\n".
func parseHello(line string, validID func(string) bool) (agent string, mac []byte, err error) {
	agent, text, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if !ok || !validID(agent) {
		return "", nil, errors.New("hostlink: malformed hello")
	}
	if mac, err = hex.DecodeString(text); err != nil || len(mac) != sha256.Size {
		return "", nil, errors.New("hostlink: malformed proof")
	}
	return agent, mac, nil
}

// sum is the proof of agent for challenge under token.
func sum(token string, challenge []byte, agent string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write(challenge)
	m.Write([]byte(agent))
	return m.Sum(nil)
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

// Dial keeps agent's link to the watcher at addr until ctx ends: it dials,
// and dials again (at most every second) after a loss. It returns once the
// first link is up, or with the error of the first try; later losses are
// the watcher's to see.
func Dial(ctx context.Context, addr, token, agent string, timeout time.Duration) error {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	c, err := dialOnce(ctx, addr, token, agent, timeout)
	if err != nil {
		return err
	}
	go func() {
		for {
			held(ctx, c)
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if c, err = dialOnce(ctx, addr, token, agent, timeout); err == nil {
					break
				}
			}
		}
	}()
	return nil
}

// held waits until c is gone or ctx ends, then closes c.
func held(ctx context.Context, c net.Conn) {
	done := make(chan struct{})
	go func() {
		var b [64]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				close(done)
				return
			}
		}
	}()
	select {
	case <-ctx.Done():
	case <-done:
	}
	c.Close()
}

func dialOnce(ctx context.Context, addr, token, agent string, timeout time.Duration) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, handshakeWait)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hostlink: dial the job's link watcher at %s: %w", addr, err)
	}
	fail := func(err error) (net.Conn, error) {
		c.Close()
		return nil, fmt.Errorf("hostlink: handshake with the job's link watcher at %s: %w", addr, err)
	}
	c.SetDeadline(time.Now().Add(handshakeWait))
	challenge := make([]byte, challengeLen)
	if _, err := io.ReadFull(c, challenge); err != nil {
		return fail(err)
	}
	if _, err := fmt.Fprintf(c, "%s %s\n", agent, hex.EncodeToString(sum(token, challenge, agent))); err != nil {
		return fail(err)
	}
	c.SetDeadline(time.Time{})
	if err := keep(c, timeout); err != nil {
		return fail(err)
	}
	return c, nil
}
