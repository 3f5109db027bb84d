package hostlink

import (
	"bufio"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"
)

// DialOptions configures Dial.
type DialOptions struct {
	// Addr is the link watcher's address, host:port.
	Addr string
	// Agent is this agent's id.
	Agent string
	// Job is the job's id, which a MUNGE proof names.
	Job string
	// Timeout bounds how long the link may go unanswered (DefaultTimeout
	// when zero).
	Timeout time.Duration
	// TLS is the client side: RootCAs the job's CA, ServerName the
	// watcher's name or address. nil: plain TCP.
	TLS *tls.Config
	// Token is the job's token, for an HMAC proof; empty: a MUNGE proof
	// (over TLS), after which the watcher sends the token.
	Token string
	// Munge makes a MUNGE credential carrying payload (internal/munge's
	// Encode, restricted to this uid); needed when Token is empty.
	Munge func(ctx context.Context, payload []byte) (cred []byte, err error)
	// Key, when set, is a key this agent made, for which it asks the
	// watcher a certificate valid for Names (its host names and
	// addresses).
	Key   crypto.Signer
	Names []string
}

// Admission is what an agent holds once admitted.
type Admission struct {
	// Token is the job's token: Options.Token, or the watcher's answer to
	// a MUNGE proof.
	Token string
	// CertPEM is the certificate for Options.Key, if one was asked for.
	CertPEM []byte
}

// admitWait bounds the tries of a first admission: a watcher at its
// bounds (see the package doc) refuses a peer at once, and a real agent
// tries again, until then.
const admitWait = 30 * time.Second

// Dial keeps o.Agent's link to the watcher at o.Addr until ctx ends: it
// dials, and dials again (at most every second) after a loss. It returns
// once the first link is up, with what that admission gave, or with the
// error that ended its tries: a refusal of its proof or of the watcher's
// certificate at once; a watcher that drops it unanswered or says it is
// busy is tried again, after a growing pause, for up to 30 s. Later
// losses are the watcher's to see. Dials after a loss prove with the
// token the first one held or received (an HMAC) and ask for nothing.
func Dial(ctx context.Context, o DialOptions) (Admission, error) {
	if err := o.check(); err != nil {
		return Admission{}, err
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	c, adm, err := dialFirst(ctx, o)
	if err != nil {
		return Admission{}, err
	}
	again := DialOptions{Addr: o.Addr, Agent: o.Agent, Job: o.Job, Timeout: o.Timeout, TLS: o.TLS, Token: adm.Token}
	go func() {
		for {
			held(ctx, c)
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if c, _, err = dialOnce(ctx, again); err == nil {
					break
				}
			}
		}
	}()
	return adm, nil
}

func (o *DialOptions) check() error {
	switch {
	case o.Addr == "" || o.Agent == "" || strings.ContainsAny(o.Agent, " \t\n"):
		return fmt.Errorf("hostlink: dial needs the watcher's address and a one-word agent id (%q, %q)", o.Addr, o.Agent)
	case o.Token == "" && (o.TLS == nil || o.Munge == nil || o.Job == "" || strings.ContainsAny(o.Job, " \t\n")):
		return errors.New("hostlink: without the token, a MUNGE proof needs TLS, Munge and the job's id")
	case o.Key == nil && len(o.Names) > 0:
		return errors.New("hostlink: names for a certificate need a key")
	}
	if err := checkNames(o.Names); err != nil {
		return fmt.Errorf("hostlink: certificate names: %w", err)
	}
	return nil
}

// dialFirst makes the first link, trying again while the watcher drops
// it before an answer or says it is busy.
func dialFirst(ctx context.Context, o DialOptions) (net.Conn, Admission, error) {
	ctx, cancel := context.WithTimeout(ctx, admitWait)
	defer cancel()
	pause := 50 * time.Millisecond
	for tries := 1; ; tries++ {
		c, adm, err := dialOnce(ctx, o)
		if err == nil || !errors.Is(err, errAgain) {
			return c, adm, err
		}
		// Spread the tries of many agents refused at once.
		wait := pause/2 + rand.N(pause/2)
		pause = min(2*pause, 2*time.Second)
		select {
		case <-ctx.Done():
			return nil, Admission{}, fmt.Errorf("%w (gave up after %d tries)", err, tries)
		case <-time.After(wait):
		}
	}
}

// errAgain marks a failure worth another try: the watcher dropped the
// connection unanswered (its bounds on peers in handshake) or was busy.
var errAgain = errors.New("retryable")

// again tells whether err, of a handshake, is worth another try.
func again(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) && ne.Timeout()
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

// dialOnce makes one link and returns its TCP conn: under TLS too, the
// kernel's keepalive and user timeout are the TCP conn's, and nothing is
// read or written after the handshake.
func dialOnce(ctx context.Context, o DialOptions) (net.Conn, Admission, error) {
	dctx, cancel := context.WithTimeout(ctx, handshakeWait)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", o.Addr)
	if err != nil {
		// A reset is the watcher at its bounds; refused, it is not there.
		if ctx.Err() == nil && again(err) {
			err = fmt.Errorf("%w (%w)", err, errAgain)
		}
		return nil, Admission{}, fmt.Errorf("hostlink: dial the job's link watcher at %s: %w", o.Addr, err)
	}
	fail := func(err error) (net.Conn, Admission, error) {
		raw.Close()
		if ctx.Err() == nil && again(err) {
			err = fmt.Errorf("%w (%w)", err, errAgain)
		}
		return nil, Admission{}, fmt.Errorf("hostlink: handshake with the job's link watcher at %s: %w", o.Addr, err)
	}
	raw.SetDeadline(time.Now().Add(handshakeWait))
	stop := context.AfterFunc(dctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c := raw
	var binding []byte
	if o.TLS == nil {
		if _, err := io.WriteString(raw, greeting); err != nil {
			return fail(err)
		}
	} else {
		tc := tls.Client(raw, o.TLS)
		if err := tc.HandshakeContext(dctx); err != nil {
			return fail(fmt.Errorf("TLS: %w", err))
		}
		if binding, err = exportBinding(tc); err != nil {
			return fail(err)
		}
		c = tc
	}
	challenge := make([]byte, challengeLen)
	if _, err := io.ReadFull(c, challenge); err != nil {
		return fail(err)
	}
	h := hello{agent: o.Agent}
	if o.Token != "" {
		h.mac = sum(o.Token, challenge, o.Agent)
	} else if h.cred, err = o.Munge(dctx, mungePayload(o.Job, o.Agent, challenge, binding)); err != nil {
		return fail(fmt.Errorf("MUNGE credential: %w", err))
	} else if !credential(string(h.cred)) {
		return fail(fmt.Errorf("MUNGE credential %.40q... is not munge's armor", h.cred))
	}
	var req request
	if o.Key != nil {
		if req.der, err = x509.MarshalPKIXPublicKey(o.Key.Public()); err != nil {
			return fail(fmt.Errorf("certificate request: %w", err))
		}
		req.names = o.Names
	}
	if _, err := io.WriteString(c, formatHello(h)+formatRequest(req)); err != nil {
		return fail(err)
	}
	line, err := readLine(bufio.NewReader(io.LimitReader(c, maxAnswer)), maxAnswer)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("closed without an answer (%w)", errAgain)
		}
		return fail(err)
	}
	a, err := parseAnswer(line)
	switch {
	case err != nil:
		return fail(err)
	case strings.HasPrefix(a.err, busyPrefix):
		return fail(fmt.Errorf("%s (%w)", a.err, errAgain))
	case a.err != "":
		return fail(errors.New(a.err))
	}
	adm := Admission{Token: o.Token}
	if o.Token == "" {
		if a.token == "" {
			return fail(errors.New("admitted without the job's token"))
		}
		adm.Token = a.token
	}
	if o.Key != nil {
		if err := certifies(a.cert, o.Key.Public()); err != nil {
			return fail(err)
		}
		adm.CertPEM = a.cert
	}
	if !stop() {
		return fail(dctx.Err())
	}
	raw.SetDeadline(time.Time{})
	if err := keep(raw, o.Timeout); err != nil {
		return fail(err)
	}
	return raw, adm, nil
}

// certifies checks that certPEM is a certificate of pub.
func certifies(certPEM []byte, pub crypto.PublicKey) error {
	if certPEM == nil {
		return errors.New("no certificate in the answer")
	}
	b, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return fmt.Errorf("the certificate: %w", err)
	}
	if k, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(cert.PublicKey) {
		return errors.New("the certificate is for another key")
	}
	return nil
}
