package hostlink

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The handshake's lines (see the package doc). Each is bounded: a peer
// that sends more is refused.
const (
	challengeLen = 16
	maxHello     = 2048 // an id and a MUNGE credential (a few hundred bytes), with room
	maxRequest   = 4096 // a public key and its names
	maxAnswer    = 16 << 10
	maxNames     = 32
	maxName      = 253 // a DNS name's longest
	maxKeyDER    = 1024
	maxErrorText = 1000
)

var errLong = errors.New("line too long")

// greeting is what an agent sends first over plain TCP, before the
// watcher's challenge: a peer speaks first, as its TLS hello does under
// TLS, so that the watcher's door holds one that sends nothing without
// reading it (or answering it).
const greeting = "monarch-link\n"

// readGreeting reads a plain TCP peer's greeting.
func readGreeting(c io.Reader) error {
	var b [len(greeting)]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	if string(b[:]) != greeting {
		return errors.New("no greeting: not a link")
	}
	return nil
}

// readLine reads one line of at most most bytes, its "\n" included.
func readLine(r *bufio.Reader, most int) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > most {
			return "", errLong
		}
		if err == nil {
			return string(b), nil
		}
		if err != bufio.ErrBufferFull {
			return "", err
		}
	}
}

// hello is an agent's first line: its id and one proof, an HMAC under the
// job's token or a MUNGE credential.
type hello struct {
	agent string
	mac   []byte
	cred  []byte
}

// formatHello is "<id> <hex HMAC>\n" or "<id> munge <credential>\n".
func formatHello(h hello) string {
	if h.cred != nil {
		return h.agent + " munge " + string(h.cred) + "\n"
	}
	return h.agent + " " + hex.EncodeToString(h.mac) + "\n"
}

func parseHello(line string, validID func(string) bool) (hello, error) {
	agent, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if !ok || !validID(agent) {
		return hello{}, errors.New("malformed hello")
	}
	if cred, ok := strings.CutPrefix(rest, "munge "); ok {
		if !credential(cred) {
			return hello{}, errors.New("malformed MUNGE credential")
		}
		return hello{agent: agent, cred: []byte(cred)}, nil
	}
	mac, err := hex.DecodeString(rest)
	if err != nil || len(mac) != sha256.Size {
		return hello{}, errors.New("malformed proof")
	}
	return hello{agent: agent, mac: mac}, nil
}

// credential tells whether s may be a MUNGE credential: munge's armor,
// "MUNGE:" and base64, printable and without spaces.
func credential(s string) bool {
	if !strings.HasPrefix(s, "MUNGE:") || len(s) > maxHello {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// sum is the HMAC proof of agent for challenge under token.
func sum(token string, challenge []byte, agent string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write(challenge)
	m.Write([]byte(agent))
	return m.Sum(nil)
}

// mungePayload is what a MUNGE proof's credential must carry: the job,
// the agent, the challenge and the TLS session's binding, so that it
// proves this one admission, on this one connection.
func mungePayload(job, agent string, challenge, binding []byte) []byte {
	return fmt.Appendf(nil, "monarch-link %s %s %x %x", job, agent, challenge, binding)
}

// bindingLabel names the keying material a MUNGE proof carries (RFC
// 5705's exporter, of TLS 1.3 here): both ends of one TLS session, and
// only they, compute the same.
const (
	bindingLabel = "EXPORTER-monarch-link-munge"
	bindingLen   = 32
)

// exportBinding is c's keying material for a MUNGE proof: a credential
// relayed from another session names another.
func exportBinding(c *tls.Conn) ([]byte, error) {
	cs := c.ConnectionState()
	b, err := cs.ExportKeyingMaterial(bindingLabel, nil, bindingLen)
	if err != nil {
		return nil, fmt.Errorf("TLS keying material for the MUNGE proof: %w", err)
	}
	return b, nil
}

// errBusy refuses a proof the watcher has no room to check now: the
// agent tries again (an answer "error busy: ...").
var errBusy = errors.New(busyPrefix + " too many MUNGE credentials to decode now, try again")

// errPenalized refuses a proof from a source whose proofs failed of late
// (see gate), before it is decoded; the agent tries again.
var errPenalized = errors.New(busyPrefix + " proofs from this address failed of late, try again")

const busyPrefix = "busy:"

// MUNGE credential sizes (munge's credential_v3_format.txt): version,
// cipher, MAC and zip types, realm length, salt, origin address length,
// six 32-bit fields and the payload's length come to 46 bytes at least;
// a realm (up to 255 bytes), an IV, a MAC (up to SHA-512's) and the
// cipher's padding add at most 512 more.
const (
	minCredOverhead = 46
	maxCredOverhead = 512
	credVersion     = 3
)

// plausible does the cheap checks of a MUNGE credential that should carry
// payloadLen bytes, before any process is spent on it: munge's armor
// around base64, version 3, a realm within, and a length that fits the
// payload (compression aside, which only shrinks it).
func plausible(cred []byte, payloadLen int) error {
	body, ok := bytes.CutPrefix(cred, []byte("MUNGE:"))
	if ok {
		body, ok = bytes.CutSuffix(body, []byte(":"))
	}
	if !ok {
		return errors.New("not munge's armor (MUNGE:...:)")
	}
	if base64.StdEncoding.DecodedLen(len(body)) > payloadLen+maxCredOverhead {
		return fmt.Errorf("%d bytes, too long for its payload", len(cred))
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(body)))
	n, err := base64.StdEncoding.Decode(raw, body)
	if err != nil {
		return errors.New("not base64")
	}
	raw = raw[:n]
	switch {
	case n < minCredOverhead:
		return fmt.Errorf("%d bytes, too short for a credential", n)
	case raw[0] != credVersion:
		return fmt.Errorf("version %d, not %d", raw[0], credVersion)
	case int(raw[4])+minCredOverhead > n:
		return fmt.Errorf("a realm of %d bytes in %d", raw[4], n)
	}
	return nil
}

// request is an agent's second line: nothing, or a certificate for its
// public key and names (host names or addresses).
type request struct {
	key   crypto.PublicKey
	der   []byte // key, PKIX DER
	names []string
}

// formatRequest is "none\n" or "cert <base64 PKIX DER>[ <name>,<name>...]\n".
func formatRequest(r request) string {
	if r.der == nil {
		return "none\n"
	}
	line := "cert " + base64.StdEncoding.EncodeToString(r.der)
	if len(r.names) > 0 {
		line += " " + strings.Join(r.names, ",")
	}
	return line + "\n"
}

func parseRequest(line string) (request, error) {
	line = strings.TrimSuffix(line, "\n")
	if line == "none" {
		return request{}, nil
	}
	fields := strings.Split(line, " ")
	if fields[0] != "cert" || len(fields) < 2 || len(fields) > 3 {
		return request{}, errors.New("malformed request")
	}
	if base64.StdEncoding.DecodedLen(len(fields[1])) > maxKeyDER {
		return request{}, errors.New("malformed request: key too long")
	}
	der, err := base64.StdEncoding.DecodeString(fields[1])
	if err != nil {
		return request{}, errors.New("malformed request: key not base64")
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return request{}, errors.New("malformed request: the key is no PKIX public key x509 can read")
	}
	r := request{key: key, der: der}
	if len(fields) == 3 {
		r.names = strings.Split(fields[2], ",")
		if err := checkNames(r.names); err != nil {
			return request{}, fmt.Errorf("malformed request: %v", err)
		}
	}
	return r, nil
}

// checkNames accepts host names and IP addresses (v6 with a zone too).
func checkNames(names []string) error {
	if len(names) > maxNames {
		return fmt.Errorf("%d names, over %d", len(names), maxNames)
	}
	for _, n := range names {
		if n == "" || len(n) > maxName {
			return fmt.Errorf("name %q", n)
		}
		for i := 0; i < len(n); i++ {
			c := n[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_:%", c) >= 0) {
				return fmt.Errorf("name %q", n)
			}
		}
	}
	return nil
}

// answer is the watcher's one line: an admission, or why not.
type answer struct {
	token string // to a MUNGE-proven agent only
	cert  []byte // PEM, if asked for
	err   string
}

// formatAnswer is "ok[ token=<base64>][ cert=<base64 PEM>]\n" or
// "error <text>\n".
func formatAnswer(a answer) string {
	if a.err != "" {
		text := strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return ' '
			}
			return r
		}, a.err)
		if len(text) > maxErrorText {
			text = text[:maxErrorText]
		}
		return "error " + text + "\n"
	}
	line := "ok"
	if a.token != "" {
		line += " token=" + base64.StdEncoding.EncodeToString([]byte(a.token))
	}
	if a.cert != nil {
		line += " cert=" + base64.StdEncoding.EncodeToString(a.cert)
	}
	return line + "\n"
}

func parseAnswer(line string) (answer, error) {
	line = strings.TrimSuffix(line, "\n")
	if text, ok := strings.CutPrefix(line, "error "); ok {
		if text == "" {
			text = "refused"
		}
		return answer{err: text}, nil
	}
	fields := strings.Split(line, " ")
	if fields[0] != "ok" {
		return answer{}, errors.New("malformed answer")
	}
	var a answer
	for _, f := range fields[1:] {
		key, value, _ := strings.Cut(f, "=")
		b, err := base64.StdEncoding.DecodeString(value)
		if err != nil || len(b) == 0 {
			return answer{}, fmt.Errorf("malformed answer: %s", key)
		}
		switch {
		case key == "token" && a.token == "":
			a.token = string(b)
		case key == "cert" && a.cert == nil:
			if p, _ := pem.Decode(b); p == nil || p.Type != "CERTIFICATE" {
				return answer{}, errors.New("malformed answer: cert is no PEM certificate")
			}
			a.cert = b
		default:
			return answer{}, fmt.Errorf("malformed answer: field %q", key)
		}
	}
	return a, nil
}
