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
	"net"
	"strings"
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

// Dial keeps o.Agent's link to the watcher at o.Addr until ctx ends: it
// dials, and dials again (at most every second) after a loss. It returns
// once the first link is up, with what that admission gave, or with the
// error of the first try; later losses are the watcher's to see. Dials
// after a loss prove with the token the first one held or received (an
// HMAC) and ask for nothing.
func Dial(ctx context.Context, o DialOptions) (Admission, error) {
	if err := o.check(); err != nil {
		return Admission{}, err
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	c, adm, err := dialOnce(ctx, o)
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
		return nil, Admission{}, fmt.Errorf("hostlink: dial the job's link watcher at %s: %w", o.Addr, err)
	}
	fail := func(err error) (net.Conn, Admission, error) {
		raw.Close()
		return nil, Admission{}, fmt.Errorf("hostlink: handshake with the job's link watcher at %s: %w", o.Addr, err)
	}
	raw.SetDeadline(time.Now().Add(handshakeWait))
	stop := context.AfterFunc(dctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c := raw
	if o.TLS != nil {
		tc := tls.Client(raw, o.TLS)
		if err := tc.HandshakeContext(dctx); err != nil {
			return fail(fmt.Errorf("TLS: %w", err))
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
	} else if h.cred, err = o.Munge(dctx, mungePayload(o.Job, o.Agent, challenge)); err != nil {
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
			err = errors.New("closed without an answer")
		}
		return fail(err)
	}
	a, err := parseAnswer(line)
	switch {
	case err != nil:
		return fail(err)
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
