package hostlink

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/munge"
	"github.com/monarch-go/monarch/internal/testcluster"
)

func dialCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends the agent's link, and its redials
	return ctx
}

// An agent that holds the token proves it over TLS as over TCP, and is
// given nothing it did not ask for; a wrong token is refused with why.
func TestHMACOverTLS(t *testing.T) {
	ca := newCA(t, "j1")
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca)})
	adm, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", TLS: clientTLS(ca), Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if adm.Token != "secret" || adm.CertPEM != nil {
		t.Fatalf("admission %+v", adm)
	}
	if e := next(t, events, 5*time.Second); !e.Up || e.Agent != "h1" {
		t.Fatalf("%+v", e)
	}
	_, err = Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h2", TLS: clientTLS(ca), Token: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "wrong proof") || !strings.Contains(err.Error(), addrOf(w)) {
		t.Fatalf("a wrong token: %v", err)
	}
	none(t, events, 500*time.Millisecond)
}

// An agent that does not trust the job's CA does not talk to the
// watcher: no proof, no token crosses.
func TestUntrustedWatcher(t *testing.T) {
	ca, other := newCA(t, "j1"), newCA(t, "j2")
	var decoded atomic.Int32
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca), Job: "j1",
		Unmunge: func(context.Context, []byte) (uint32, []byte, error) { decoded.Add(1); return 0, nil, errors.New("no") }})
	mungeFn := func(context.Context, []byte) ([]byte, error) { return []byte("MUNGE:x:"), nil }
	_, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Job: "j1", TLS: clientTLS(other), Munge: mungeFn})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("a watcher of another CA: %v", err)
	}
	t.Log(err)
	if decoded.Load() != 0 {
		t.Fatal("a credential reached the watcher")
	}
	none(t, events, 500*time.Millisecond)
}

// fakeCred is a stand-in credential of munge's shape (its armor, version
// 3, no realm; then the uid, the payload's length and the payload), and
// fakeUnmunge its decoder: what munged would say of a real one.
func fakeCred(uid int, payload []byte) []byte {
	raw := []byte{credVersion, 0, 0, 0, 0}
	raw = binary.BigEndian.AppendUint32(raw, uint32(uid))
	raw = binary.BigEndian.AppendUint32(raw, uint32(len(payload)))
	raw = append(raw, payload...)
	raw = append(raw, make([]byte, max(0, minCredOverhead-len(raw)))...)
	return []byte("MUNGE:" + base64.StdEncoding.EncodeToString(raw) + ":")
}

func fakeUnmunge(_ context.Context, cred []byte) (uint32, []byte, error) {
	body := strings.TrimSuffix(strings.TrimPrefix(string(cred), "MUNGE:"), ":")
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil || len(raw) < 13 || int(binary.BigEndian.Uint32(raw[9:])) > len(raw)-13 {
		return 0, nil, errors.New("not a fake credential")
	}
	return binary.BigEndian.Uint32(raw[5:]), raw[13 : 13+binary.BigEndian.Uint32(raw[9:])], nil
}

// A MUNGE proof admits only for the job, the agent and the challenge it
// names, made by the watcher's own uid; a proven agent receives the token.
func TestMungeBinding(t *testing.T) {
	ca := newCA(t, "j1")
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca), Job: "j1", Unmunge: fakeUnmunge})
	// field rewrites the payload's field i ("monarch-link <job> <agent>
	// <challenge> <binding>").
	field := func(i int, v string) func([]byte) []byte {
		return func(p []byte) []byte {
			f := strings.Fields(string(p))
			f[i] = v
			return []byte(strings.Join(f, " "))
		}
	}
	same := func(p []byte) []byte { return p }
	for _, tt := range []struct {
		name    string
		uid     int
		payload func([]byte) []byte
		refused string
	}{
		{"another job", os.Getuid(), field(1, "j2"), "another job, agent, challenge or TLS session"},
		{"another agent", os.Getuid(), field(2, "h9"), "another job, agent, challenge or TLS session"},
		{"another challenge", os.Getuid(), field(3, strings.Repeat("00", challengeLen)), "another job, agent, challenge or TLS session"},
		{"another TLS session", os.Getuid(), field(4, strings.Repeat("00", bindingLen)), "another job, agent, challenge or TLS session"},
		{"more", os.Getuid(), func(p []byte) []byte { return append(p, " x"...) }, "another job, agent, challenge or TLS session"},
		{"another uid", os.Getuid() + 1, same, "not the job's"},
		{"the right one", os.Getuid(), same, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			adm, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Job: "j1", TLS: clientTLS(ca),
				Munge: func(_ context.Context, p []byte) ([]byte, error) { return fakeCred(tt.uid, tt.payload(p)), nil }})
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("admitted or refused for another reason: %v", err)
				}
				t.Log(err)
				none(t, events, 200*time.Millisecond)
				return
			}
			if err != nil || adm.Token != "secret" {
				t.Fatalf("%+v, %v", adm, err)
			}
			if e := next(t, events, 5*time.Second); !e.Up || e.Agent != "h1" {
				t.Fatalf("%+v", e)
			}
		})
	}
}

// Over plain TCP a MUNGE proof is refused before it is decoded: neither
// it nor the token answering it may cross in the clear. Dial will not
// even try.
func TestMungeRefusedOverTCP(t *testing.T) {
	var decoded atomic.Int32
	w, events := startWatcher(t, WatcherOptions{Job: "j1",
		Unmunge: func(ctx context.Context, cred []byte) (uint32, []byte, error) {
			decoded.Add(1)
			return fakeUnmunge(ctx, cred)
		}})
	mungeFn := func(_ context.Context, p []byte) ([]byte, error) { return fakeCred(os.Getuid(), p), nil }
	if _, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Job: "j1", Munge: mungeFn}); err == nil || !strings.Contains(err.Error(), "needs TLS") {
		t.Fatalf("Dial tried a MUNGE proof without TLS: %v", err)
	}
	c, r, challenge := rawDial(t, w)
	fmt.Fprintf(c, "h1 munge %s\nnone\n", fakeCred(os.Getuid(), mungePayload("j1", "h1", challenge, nil)))
	if line, _ := r.ReadString('\n'); !strings.Contains(line, "TLS only") {
		t.Fatalf("answer %q", line)
	}
	if decoded.Load() != 0 {
		t.Fatal("decoded a credential that came in the clear")
	}
	none(t, events, 200*time.Millisecond)
}

// rawDial opens a plain TCP conn to w, greets it and reads its
// challenge, trying again while w drops it.
func rawDial(t *testing.T, w *Watcher) (net.Conn, *bufio.Reader, []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addrOf(w))
		if err == nil {
			c.SetDeadline(time.Now().Add(10 * time.Second))
			challenge := make([]byte, challengeLen)
			if _, err = io.WriteString(c, greeting); err == nil {
				_, err = io.ReadFull(c, challenge)
			}
			if err == nil {
				t.Cleanup(func() { c.Close() })
				return c, bufio.NewReader(c), challenge
			}
			c.Close()
		}
		if !again(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Malformed lines after a good proof, or lines over their bound, are
// refused and closed.
func TestMalformedLines(t *testing.T) {
	w, events := startWatcher(t, WatcherOptions{})
	for _, tt := range []struct {
		name, request string
	}{
		{"no request", ""},
		{"unknown request", "please\n"},
		{"key not base64", "cert !!!\n"},
		{"no key", "cert " + base64.StdEncoding.EncodeToString([]byte("not a key")) + "\n"},
		{"bad name", "cert " + base64.StdEncoding.EncodeToString(pkix(t, p256(t))) + " a b\n"},
		{"long", strings.Repeat("x", maxRequest+10) + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, r, challenge := rawDial(t, w)
			fmt.Fprintf(c, "h1 %s\n%s", hex.EncodeToString(sum("secret", challenge, "h1")), tt.request)
			if tt.request == "" {
				c.(*net.TCPConn).CloseWrite()
			}
			line, _ := r.ReadString('\n')
			if line != "" && !strings.HasPrefix(line, "error ") {
				t.Fatalf("answer %q", line)
			}
			if _, err := r.ReadByte(); err == nil {
				t.Fatal("the conn stayed open")
			}
			t.Logf("%q", line)
		})
	}
	c, r, _ := rawDial(t, w)
	io.WriteString(c, strings.Repeat("h", maxHello+10)+"\n")
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("an over-long hello got %q", line)
	}
	none(t, events, 200*time.Millisecond)
}

func p256(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pkix(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// A proven agent gets a certificate of the job's CA for its own key and
// names, as a client and as a server; a watcher without Certify, or whose
// Certify fails, refuses it with why.
func TestCertificate(t *testing.T) {
	ca := newCA(t, "j1")
	asked := make(chan []string, 4)
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca),
		Certify: func(agent string, pub crypto.PublicKey, names []string) ([]byte, error) {
			asked <- append([]string{agent}, names...)
			return ca.Sign(agent, pub, names)
		}})
	key := p256(t)
	names := []string{"127.0.0.1", "h1.test"}
	adm, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", TLS: clientTLS(ca), Token: "secret", Key: key, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(<-asked, " "); got != "h1 127.0.0.1 h1.test" {
		t.Fatalf("Certify was asked for %q", got)
	}
	b, _ := pem.Decode(adm.CertPEM)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Fatal("the certificate is for another key")
	}
	for _, name := range names {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("as %s (%v): %v", name, usage, err)
			}
		}
	}
	if e := next(t, events, 5*time.Second); !e.Up {
		t.Fatalf("%+v", e)
	}

	// jobca takes P-256 and Ed25519 keys only.
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h2", TLS: clientTLS(ca), Token: "secret", Key: p384})
	if err == nil || !strings.Contains(err.Error(), "certificate refused: jobca:") {
		t.Fatalf("a P-384 key: %v", err)
	}
	t.Log(err)
	bare, _ := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca)})
	_, err = Dial(dialCtx(t), DialOptions{Addr: addrOf(bare), Agent: "h1", TLS: clientTLS(ca), Token: "secret", Key: key})
	if err == nil || !strings.Contains(err.Error(), "certificate refused") {
		t.Fatalf("a watcher without Certify: %v", err)
	}
	none(t, events, 200*time.Millisecond)
}

// With the test cluster's munged: an agent without the token proves its
// uid over TLS, receives the token and a certificate, and after a loss
// dials again with that token; a credential for another job is refused,
// and one replayed to another admission too.
func TestMungeOverTLS(t *testing.T) {
	c := testcluster.Get(t)
	sock := filepath.Join(c.Base, "munge", "run", "munge.socket")
	ca := newCA(t, "j1")
	var mu sync.Mutex
	var creds [][]byte // what the watcher decoded
	unmunge := func(ctx context.Context, cred []byte) (uint32, []byte, error) {
		mu.Lock()
		creds = append(creds, cred)
		mu.Unlock()
		m, err := munge.Decode(ctx, sock, cred)
		return m.UID, m.Payload, err
	}
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca), Job: "j1", Unmunge: unmunge,
		Certify: func(agent string, pub crypto.PublicKey, names []string) ([]byte, error) {
			return ca.Sign(agent, pub, names)
		}})
	encode := func(ctx context.Context, payload []byte) ([]byte, error) {
		return munge.Encode(ctx, sock, payload, os.Getuid())
	}
	key := p256(t)
	adm, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Job: "j1", TLS: clientTLS(ca), Munge: encode, Key: key, Names: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if adm.Token != "secret" || certifies(adm.CertPEM, key.Public()) != nil {
		t.Fatalf("admission %+v", adm)
	}
	if e := next(t, events, 10*time.Second); !e.Up || e.Agent != "h1" {
		t.Fatalf("%+v", e)
	}

	// The watcher drops the link: the agent dials again, proving with
	// the token it was given.
	w.mu.Lock()
	w.conns["h1"].Close()
	w.mu.Unlock()
	if e := next(t, events, 5*time.Second); e.Up {
		t.Fatalf("%+v", e)
	}
	if e := next(t, events, 10*time.Second); !e.Up || e.Agent != "h1" {
		t.Fatalf("after the loss: %+v", e)
	}
	mu.Lock()
	first := creds
	mu.Unlock()
	if len(first) != 1 {
		t.Fatalf("%d credentials decoded, want the first dial's only", len(first))
	}

	_, err = Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h2", Job: "j2", TLS: clientTLS(ca), Munge: encode})
	if err == nil || !strings.Contains(err.Error(), "another job") {
		t.Fatalf("a credential for another job: %v", err)
	}
	t.Log(err)
	replay := func(context.Context, []byte) ([]byte, error) { return first[0], nil }
	_, err = Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Job: "j1", TLS: clientTLS(ca), Munge: replay})
	if err == nil || !strings.Contains(err.Error(), "Replayed") {
		t.Fatalf("a replayed credential: %v", err)
	}
	t.Log(err)
	none(t, events, 200*time.Millisecond)
}

// FuzzParseRequest: whatever follows a proof is refused or read as no
// request or a key with valid names, and reads back the same.
func FuzzParseRequest(f *testing.F) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(k.Public())
	f.Add("none\n")
	f.Add("cert " + base64.StdEncoding.EncodeToString(der) + " 10.0.0.1,h1.cluster,fe80::1%eth0\n")
	f.Add("cert " + base64.StdEncoding.EncodeToString(der) + "\n")
	f.Add("cert  ,\n")
	f.Fuzz(func(t *testing.T, line string) {
		r, err := parseRequest(line)
		if err != nil {
			return
		}
		if (r.key == nil) != (r.der == nil) || checkNames(r.names) != nil {
			t.Fatalf("accepted %q: %+v", line, r)
		}
		again, err := parseRequest(formatRequest(r))
		if err != nil || string(again.der) != string(r.der) || strings.Join(again.names, ",") != strings.Join(r.names, ",") {
			t.Fatalf("%+v does not read back: %+v, %v", r, again, err)
		}
	})
}

// FuzzParseAnswer: whatever a watcher answers is refused or read as an
// error text or a token and a PEM certificate, and reads back the same.
func FuzzParseAnswer(f *testing.F) {
	f.Add("ok\n")
	f.Add("ok token=c2VjcmV0\n")
	f.Add("ok cert=" + base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")) + "\n")
	f.Add("error certificate refused: no\n")
	f.Add("ok token= token=\n")
	f.Fuzz(func(t *testing.T, line string) {
		a, err := parseAnswer(line)
		if err != nil {
			return
		}
		again, err := parseAnswer(formatAnswer(a))
		if err != nil || again.token != a.token || string(again.cert) != string(a.cert) || (again.err == "") != (a.err == "") {
			t.Fatalf("%q read as %+v does not read back: %+v, %v", line, a, again, err)
		}
	})
}

// FuzzAdmit: whatever a peer sends, the watcher admits no one without
// the token, never a panic; over plain TCP, nothing before its greeting.
func FuzzAdmit(f *testing.F) {
	f.Add([]byte(greeting + "h1 " + strings.Repeat("ab", 32) + "\nnone\n"))
	f.Add([]byte(greeting + "h1 munge MUNGE:0:eA==\ncert AAAA\n"))
	f.Add([]byte(greeting + "\n\n\n"))
	f.Add([]byte("h1 " + strings.Repeat("ab", 32) + "\nnone\n")) // no greeting
	f.Add([]byte("monarch-lin"))                                 // half of it
	f.Add([]byte("MONARCH-LINK\nh1 x\n"))                        // another
	f.Fuzz(func(t *testing.T, in []byte) {
		w := &Watcher{token: "secret", validID: validID, job: "j1", unmunge: fakeUnmunge, decodes: newDecodes(), ctx: context.Background()}
		if agent, err := w.admit(context.Background(), &peer{in: bytes.NewReader(in)}, netip.Prefix{}); err == nil {
			t.Fatalf("admitted %q on %q", agent, in)
		}
	})
}

// peer is a conn whose reads are in's bytes, then EOF.
type peer struct {
	net.Conn // nil: the rest is not used
	in       *bytes.Reader
}

func (p *peer) Read(b []byte) (int, error)  { return p.in.Read(b) }
func (p *peer) Write(b []byte) (int, error) { return len(b), nil }
func (p *peer) SetDeadline(time.Time) error { return nil }
