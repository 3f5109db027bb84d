package munge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Credential is what a valid credential says: who made it, and what it
// carries.
type Credential struct {
	UID, GID uint32
	Payload  []byte
}

// munged's status codes (munge.h's munge_err_t) that a caller may want to
// tell apart; StatusError.Code holds any of them.
const (
	statusBadCred      = 8 // the first about a credential itself
	StatusExpired      = 15
	StatusRewound      = 16 // made "in the future": clocks apart
	StatusReplayed     = 17
	StatusUnauthorized = 18 // restricted to another uid or gid
)

// StatusError is munged's refusal of a credential it could read.
type StatusError struct {
	Socket string // "" for munged's default
	Code   int
	Text   string // munged's words, as "Replayed credential"
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("munge: credential refused (munged at %s): %s (%d)", where(e.Socket), e.Text, e.Code)
}

// maxOutput bounds what is read of a program's output: munged takes
// payloads up to 1 MiB.
const maxOutput = 4 << 20

// waitDelay bounds the wait for a killed program's output pipes.
const waitDelay = time.Second

// Encode makes a credential carrying payload, by munged at socket, that
// only restrictUID may decode (any uid when it is negative). It returns
// the credential as text ("MUNGE:...:").
func Encode(ctx context.Context, socket string, payload []byte, restrictUID int) ([]byte, error) {
	args := socketArgs(socket)
	if restrictUID >= 0 {
		// -u restricts decoding; -U would claim another uid (root only).
		args = append(args, "--restrict-uid", strconv.Itoa(restrictUID))
	}
	out, err := run(ctx, payload, "munge", args...)
	if err != nil {
		return nil, fmt.Errorf("munge: encode with munged at %s: %w", where(socket), err)
	}
	cred := bytes.TrimSpace(out)
	if !bytes.HasPrefix(cred, []byte("MUNGE:")) {
		return nil, fmt.Errorf("munge: encode with munged at %s: munge wrote %q, not a credential", where(socket), clip(cred))
	}
	return cred, nil
}

// Decode checks cred with munged at socket and returns what it says. A
// credential munged refuses (expired, replayed, restricted to another
// uid) is a *StatusError.
func Decode(ctx context.Context, socket string, cred []byte) (Credential, error) {
	args := append(socketArgs(socket), "--keys", "STATUS,UID,GID,LENGTH")
	out, err := run(ctx, cred, "unmunge", args...)
	// A credential munged could read but refuses still has its metadata:
	// say munged's reason rather than unmunge's exit code.
	m, perr := parseUnmunge(out)
	if m.status != 0 {
		return Credential{}, &StatusError{Socket: socket, Code: m.status, Text: m.statusText}
	}
	// One it will not say anything of (restricted to another uid, not a
	// credential) is unmunge's exit status, with its words on stderr.
	var ee *exitError
	if errors.As(err, &ee) && ee.code >= statusBadCred && ee.code <= StatusUnauthorized {
		return Credential{}, &StatusError{Socket: socket, Code: ee.code, Text: strings.TrimPrefix(ee.msg, "unmunge: Error: ")}
	}
	if err != nil {
		return Credential{}, fmt.Errorf("munge: decode with munged at %s: %w", where(socket), err)
	}
	if perr != nil {
		return Credential{}, fmt.Errorf("munge: decode with munged at %s: unmunge's output: %w", where(socket), perr)
	}
	return m.cred, nil
}

// SocketFromSlurm is the munged socket Slurm's auth/munge uses here (its
// AuthInfo's socket=), or "" for munged's default, from `scontrol show
// config` (so SLURM_CONF, if set, is the config read).
func SocketFromSlurm(ctx context.Context) (string, error) {
	out, err := run(ctx, nil, "scontrol", "show", "config")
	if err != nil {
		return "", fmt.Errorf("munge: scontrol show config: %w", err)
	}
	return parseSlurmConfig(string(out))
}

func socketArgs(socket string) []string {
	if socket == "" {
		return nil
	}
	return []string{"--socket", socket}
}

func where(socket string) string {
	if socket == "" {
		return "its default socket"
	}
	return socket
}

// run runs name with stdin, bounded by ctx, and returns its output; a
// nonzero exit is an *exitError with its stderr.
func run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	if ctx.Err() != nil {
		return stdout.b, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return stdout.b, &exitError{name: name, code: ee.ExitCode(), msg: clip(bytes.TrimSpace(stderr.b))}
	}
	if errors.Is(err, exec.ErrNotFound) {
		return nil, fmt.Errorf("%s is not installed here (the munge package, or slurm-client for scontrol): %w", name, err)
	}
	if err != nil {
		return stdout.b, fmt.Errorf("%s: %w", name, err)
	}
	if stdout.over {
		return nil, fmt.Errorf("%s: output over %d bytes", name, maxOutput)
	}
	return stdout.b, nil
}

// exitError is a program's failure: its exit status and what it said.
type exitError struct {
	name string
	code int
	msg  string
}

func (e *exitError) Error() string {
	return fmt.Sprintf("%s exited with status %d: %s", e.name, e.code, e.msg)
}

// capped keeps the first maxOutput bytes written to it and drops the
// rest, so that a program never blocks on a pipe nobody reads.
type capped struct {
	b    []byte
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := maxOutput - len(c.b)
	if len(p) > room {
		c.over = true
		c.b = append(c.b, p[:room]...)
	} else {
		c.b = append(c.b, p...)
	}
	return len(p), nil
}

func clip(b []byte) string {
	const most = 300
	if len(b) > most {
		return string(b[:most]) + "..."
	}
	return string(b)
}

// unmungeOut is unmunge's output, read.
type unmungeOut struct {
	status     int
	statusText string
	cred       Credential
}

// parseUnmunge reads unmunge's output: lines "KEY: value" (STATUS, UID,
// GID and LENGTH among them), a blank line, then LENGTH bytes of payload.
// Values are "text (number)", or a number alone (unmunge -N).
func parseUnmunge(out []byte) (unmungeOut, error) {
	var m unmungeOut
	head, payload, ok := bytes.Cut(out, []byte("\n\n"))
	if !ok {
		return m, errors.New("no end of metadata")
	}
	seen := map[string]string{}
	for _, line := range strings.Split(string(head), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || key == "" {
			return m, fmt.Errorf("metadata line %q", clip([]byte(line)))
		}
		if _, dup := seen[key]; dup {
			return m, fmt.Errorf("metadata key %s twice", key)
		}
		seen[key] = strings.TrimSpace(value)
	}
	for _, key := range []string{"STATUS", "UID", "GID", "LENGTH"} {
		if _, ok := seen[key]; !ok {
			return m, fmt.Errorf("no %s in the metadata", key)
		}
	}
	n, text, err := numbered(seen["STATUS"])
	if err != nil || n > 255 {
		return m, fmt.Errorf("STATUS %q", seen["STATUS"])
	}
	m.status, m.statusText = int(n), text
	if n, _, err = numbered(seen["UID"]); err != nil || n > 1<<32-1 {
		return m, fmt.Errorf("UID %q", seen["UID"])
	}
	m.cred.UID = uint32(n)
	if n, _, err = numbered(seen["GID"]); err != nil || n > 1<<32-1 {
		return m, fmt.Errorf("GID %q", seen["GID"])
	}
	m.cred.GID = uint32(n)
	length, err := strconv.ParseUint(seen["LENGTH"], 10, 32)
	if err != nil {
		return m, fmt.Errorf("LENGTH %q", seen["LENGTH"])
	}
	if uint64(len(payload)) != length {
		return m, fmt.Errorf("a payload of %d bytes where LENGTH says %d", len(payload), length)
	}
	m.cred.Payload = payload
	return m, nil
}

// numbered reads "text (n)" or "n".
func numbered(v string) (n uint64, text string, err error) {
	if rest, ok := strings.CutSuffix(v, ")"); ok {
		if i := strings.LastIndex(rest, " ("); i >= 0 {
			text, v = rest[:i], rest[i+2:]
		}
	}
	if n, err = strconv.ParseUint(v, 10, 64); err != nil {
		return 0, "", fmt.Errorf("%q is not a number", v)
	}
	return n, text, nil
}

// parseSlurmConfig finds the munged socket in `scontrol show config`'s
// output ("Key = value" lines): AuthType must be auth/munge, and AuthInfo
// may hold socket=PATH among comma-separated items.
func parseSlurmConfig(out string) (string, error) {
	var authType, authInfo string
	for _, line := range strings.Split(out, "\n") {
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "AuthType":
			authType = strings.TrimSpace(value)
		case "AuthInfo":
			authInfo = strings.TrimSpace(value)
		}
	}
	switch authType {
	case "auth/munge":
	case "":
		return "", errors.New("munge: scontrol show config says no AuthType")
	default:
		return "", fmt.Errorf("munge: Slurm's AuthType is %s, not auth/munge", clip([]byte(authType)))
	}
	if authInfo == "(null)" {
		return "", nil
	}
	for _, item := range strings.Split(authInfo, ",") {
		key, value, _ := strings.Cut(strings.TrimSpace(item), "=")
		if key != "socket" {
			continue
		}
		if value == "" {
			return "", fmt.Errorf("munge: Slurm's AuthInfo %q has an empty socket", clip([]byte(authInfo)))
		}
		return value, nil
	}
	return "", nil
}
