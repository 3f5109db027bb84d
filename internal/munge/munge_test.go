package munge

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(code)
}

// clusterSocket is the test cluster's munged socket (skips without it).
func clusterSocket(t *testing.T) (*testcluster.Cluster, string) {
	t.Helper()
	c := testcluster.Get(t)
	return c, filepath.Join(c.Base, "munge", "run", "munge.socket")
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A payload comes back as it went, with the maker's uid and gid, blank
// lines and binary bytes included (unmunge writes it after its metadata).
func TestRoundTrip(t *testing.T) {
	_, sock := clusterSocket(t)
	ctx := timeout(t)
	for _, payload := range [][]byte{[]byte("monarch-link j1 h0 00ff"), {}, []byte("\n\nSTATUS: Success (0)\n\n\x00\xff")} {
		cred, err := Encode(ctx, sock, payload, os.Getuid())
		if err != nil {
			t.Fatal(err)
		}
		c, err := Decode(ctx, sock, cred)
		if err != nil {
			t.Fatal(err)
		}
		if c.UID != uint32(os.Getuid()) || c.GID != uint32(os.Getgid()) || !bytes.Equal(c.Payload, payload) {
			t.Fatalf("decoded %d/%d %q, want %d/%d %q", c.UID, c.GID, c.Payload, os.Getuid(), os.Getgid(), payload)
		}
	}
}

// munged refuses a credential it has decoded already, and one restricted
// to another uid, saying why.
func TestRefusals(t *testing.T) {
	_, sock := clusterSocket(t)
	ctx := timeout(t)
	cred, err := Encode(ctx, sock, []byte("once"), os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(ctx, sock, cred); err != nil {
		t.Fatal(err)
	}
	_, err = Decode(ctx, sock, cred)
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Code != StatusReplayed || !strings.Contains(err.Error(), sock) {
		t.Fatalf("a replayed credential: %v", err)
	}
	t.Log(err)

	cred, err = Encode(ctx, sock, []byte("theirs"), os.Getuid()+1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode(ctx, sock, cred)
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Code != StatusUnauthorized {
		t.Fatalf("a credential for another uid: %v", err)
	}
	t.Log(err)
}

// What is no credential is refused with munge's words and the socket.
func TestGarbageRefused(t *testing.T) {
	_, sock := clusterSocket(t)
	ctx := timeout(t)
	for _, cred := range []string{"", "not a credential", "MUNGE:AwQFAAAgarbagegarbage:"} {
		_, err := Decode(ctx, sock, []byte(cred))
		if err == nil || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "credential") {
			t.Fatalf("%q: %v", cred, err)
		}
		t.Logf("%q: %v", cred, err)
	}
}

// Without munged at the socket, both ways fail naming it; a context that
// has ended stops them.
func TestNoMunged(t *testing.T) {
	if _, err := exec.LookPath("unmunge"); err != nil {
		t.Skip("munge is not installed")
	}
	sock := filepath.Join(t.TempDir(), "none.socket")
	ctx := timeout(t)
	if _, err := Encode(ctx, sock, []byte("x"), -1); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("encode: %v", err)
	}
	if _, err := Decode(ctx, sock, []byte("MUNGE:x:")); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("decode: %v", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Encode(done, sock, []byte("x"), -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("encode after the context's end: %v", err)
	}
}

func TestSocketFromSlurm(t *testing.T) {
	c, sock := clusterSocket(t)
	t.Setenv("SLURM_CONF", c.SlurmConf)
	got, err := SocketFromSlurm(timeout(t))
	if err != nil || got != sock {
		t.Fatalf("SocketFromSlurm = %q, %v; want %q", got, err, sock)
	}
}

func TestParseSlurmConfig(t *testing.T) {
	for _, tt := range []struct {
		out, socket, err string
	}{
		{out: "AuthType                = auth/munge\nAuthInfo                = socket=/run/m.sock\n", socket: "/run/m.sock"},
		{out: "AuthInfo = cred_expire=120,socket=/x/y, ttl=60\nAuthType = auth/munge\n", socket: "/x/y"},
		{out: "AuthType = auth/munge\nAuthInfo = (null)\n", socket: ""},
		{out: "AuthType = auth/munge\nAuthInfo = ttl=60\n", socket: ""},
		{out: "AuthType = auth/munge\nAuthInfo = socket=\n", err: "empty socket"},
		{out: "AuthType = auth/slurm\nAuthInfo = (null)\n", err: "auth/slurm, not auth/munge"},
		{out: "Slurmctld(primary) at vm is UP\n", err: "no AuthType"},
	} {
		got, err := parseSlurmConfig(tt.out)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %q, %v; want an error with %q", tt.out, got, err, tt.err)
			}
		} else if err != nil || got != tt.socket {
			t.Errorf("%q: %q, %v; want %q", tt.out, got, err, tt.socket)
		}
	}
}

func TestParseUnmunge(t *testing.T) {
	named := "STATUS:          Replayed credential (17)\nUID:             root (0)\nGID:             users (100)\nLENGTH:          3\n\npay"
	m, err := parseUnmunge([]byte(named))
	if err != nil || m.status != 17 || m.statusText != "Replayed credential" || m.cred.UID != 0 || m.cred.GID != 100 || string(m.cred.Payload) != "pay" {
		t.Fatalf("%+v, %v", m, err)
	}
	numeric := "STATUS: 0\nUID: 1000\nGID: 1000\nLENGTH: 0\n\n"
	if m, err := parseUnmunge([]byte(numeric)); err != nil || m.status != 0 || m.cred.UID != 1000 || len(m.cred.Payload) != 0 {
		t.Fatalf("%+v, %v", m, err)
	}
	for _, bad := range []string{
		"", "STATUS: 0\n", "STATUS: 0\nUID: 0\nGID: 0\n\n", "STATUS: 0\nUID: 0\nGID: 0\nLENGTH: 4\n\npay",
		"STATUS: 0\nUID: -1\nGID: 0\nLENGTH: 0\n\n", "STATUS: 0\nUID: 4294967296\nGID: 0\nLENGTH: 0\n\n",
		"STATUS: 0\nSTATUS: 0\nUID: 0\nGID: 0\nLENGTH: 0\n\n", "junk\n\n",
	} {
		if m, err := parseUnmunge([]byte(bad)); err == nil {
			t.Errorf("%q read as %+v", bad, m)
		}
	}
}

// FuzzParseUnmunge: whatever unmunge writes is refused or read into a
// payload of the length its metadata says, never a panic.
func FuzzParseUnmunge(f *testing.F) {
	f.Add([]byte("STATUS:          Success (0)\nUID:             root (0)\nGID:             root (0)\nLENGTH:          3\n\npay"))
	f.Add([]byte("STATUS: 17\nUID: 1000\nGID: 1000\nLENGTH: 0\n\n"))
	f.Add([]byte("STATUS: x (\nUID: ()\n\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		m, err := parseUnmunge(out)
		if err != nil {
			return
		}
		_, rest, _ := bytes.Cut(out, []byte("\n\n"))
		if !bytes.Equal(m.cred.Payload, rest) || m.status < 0 || m.status > 255 {
			t.Fatalf("read %q as %+v", out, m)
		}
	})
}

// FuzzParseSlurmConfig: whatever scontrol writes gives a socket, "" or an
// error, never a panic; a socket is never empty-valued by mistake.
func FuzzParseSlurmConfig(f *testing.F) {
	f.Add("AuthType = auth/munge\nAuthInfo = socket=/run/m.sock\n")
	f.Add("AuthType = auth/munge\nAuthInfo = ,socket,=,\n")
	f.Fuzz(func(t *testing.T, out string) {
		sock, err := parseSlurmConfig(out)
		if err == nil && sock != "" && !strings.Contains(out, "socket="+sock) {
			t.Fatalf("%q gave socket %q", out, sock)
		}
	})
}
