package hostlink

import (
	"bufio"
	"crypto"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
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
// the agent and the challenge, so that it proves this one admission.
func mungePayload(job, agent string, challenge []byte) []byte {
	return fmt.Appendf(nil, "monarch-link %s %s %x", job, agent, challenge)
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
