package hostlink

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/munge"
	"github.com/monarch-go/monarch/internal/testcluster"
)

// A MUNGE proof is bound to its TLS session: a relay that holds a
// certificate of the job's CA (as every admitted host does, for the
// hub's name), between an agent and the watcher, passes a valid
// credential of the job's user from one session to the other, and it is
// refused; no link comes up and the relay never sees the token.
func TestMungeRelayRefused(t *testing.T) {
	c := testcluster.Get(t)
	sock := filepath.Join(c.Base, "munge", "run", "munge.socket")
	ca := newCA(t, "j1")
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca), Job: "j1",
		Unmunge: func(ctx context.Context, cred []byte) (uint32, []byte, error) {
			m, err := munge.Decode(ctx, sock, cred)
			return m.UID, m.Payload, err
		}})
	relay, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS(t, ca))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	var seen []byte // what the watcher said, read once relayed is closed
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		a, err := relay.Accept()
		if err != nil {
			return
		}
		defer a.Close()
		b, err := tls.Dial("tcp", addrOf(w), clientTLS(ca))
		if err != nil {
			t.Error(err)
			return
		}
		defer b.Close()
		a.SetDeadline(time.Now().Add(20 * time.Second))
		b.SetDeadline(time.Now().Add(20 * time.Second))
		go io.Copy(b, a)
		buf := make([]byte, 4096)
		for {
			n, err := b.Read(buf)
			seen = append(seen, buf[:n]...)
			if _, werr := a.Write(buf[:n]); err != nil || werr != nil {
				return
			}
		}
	}()
	encode := func(ctx context.Context, payload []byte) ([]byte, error) {
		return munge.Encode(ctx, sock, payload, os.Getuid())
	}
	_, err = Dial(dialCtx(t), DialOptions{Addr: relay.Addr().String(), Agent: "h1", Job: "j1", TLS: clientTLS(ca), Munge: encode})
	if err == nil || !strings.Contains(err.Error(), "TLS session") {
		t.Fatalf("a relayed credential: %v", err)
	}
	t.Log(err)
	select {
	case <-relayed:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay never ended")
	}
	if strings.Contains(string(seen), "token=") {
		t.Fatalf("the relay saw the token: %q", seen)
	}
	none(t, events, 200*time.Millisecond)
}

// A MUNGE credential of the wrong shape or size is refused before it is
// decoded: no process is spent on it.
func TestMungeCheapChecks(t *testing.T) {
	ca := newCA(t, "j1")
	var decoded atomic.Int32
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca), Job: "j1",
		Unmunge: func(ctx context.Context, cred []byte) (uint32, []byte, error) {
			decoded.Add(1)
			return fakeUnmunge(ctx, cred)
		}})
	armor := func(raw []byte) string { return "MUNGE:" + base64.StdEncoding.EncodeToString(raw) + ":" }
	v3 := func(n int) []byte { return append([]byte{credVersion, 4, 5, 0, 0}, make([]byte, n-5)...) }
	for _, tt := range []struct{ name, cred, refused string }{
		{"no end", strings.TrimSuffix(armor(v3(200)), ":"), "armor"},
		{"not base64", "MUNGE:AwQF!!!!" + strings.Repeat("A", 200) + ":", "not base64"},
		{"too short", armor(v3(minCredOverhead - 1)), "too short"},
		{"version 2", armor(append([]byte{2}, v3(200)[1:]...)), "version 2"},
		{"a realm past its end", armor(append([]byte{credVersion, 4, 5, 0, 255}, make([]byte, 100)...)), "realm"},
		{"too long for its payload", armor(v3(1200)), "too long"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mungeFn := func(context.Context, []byte) ([]byte, error) { return []byte(tt.cred), nil }
			_, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Job: "j1", TLS: clientTLS(ca), Munge: mungeFn})
			if err == nil || !strings.Contains(err.Error(), tt.refused) {
				t.Fatalf("%.60q...: %v; want refused for %q", tt.cred, err, tt.refused)
			}
			t.Log(err)
		})
	}
	if n := decoded.Load(); n != 0 {
		t.Fatalf("%d credentials decoded", n)
	}
	none(t, events, 200*time.Millisecond)
}

// A proof the watcher has no decode for within decodeWait (its source's
// one decode taken) is answered busy, and the agent tries again, and is
// admitted once the decode is free.
func TestBusyDecodeRetried(t *testing.T) {
	ca := newCA(t, "j1")
	release := make(chan struct{})
	var calls atomic.Int32
	w, events := startWatcher(t, WatcherOptions{TLS: serverTLS(t, ca), Job: "j1",
		Unmunge: func(ctx context.Context, cred []byte) (uint32, []byte, error) {
			if calls.Add(1) == 1 {
				select { // the first decode, of another agent, holds loopback's slot
				case <-release:
				case <-ctx.Done():
				}
				return 0, nil, fmt.Errorf("held")
			}
			return fakeUnmunge(ctx, cred)
		}})
	mungeFn := func(_ context.Context, p []byte) ([]byte, error) { return fakeCred(os.Getuid(), p), nil }
	first := make(chan error, 1)
	go func() {
		_, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h1", Job: "j1", TLS: clientTLS(ca), Munge: mungeFn})
		first <- err
	}()
	for calls.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	busy := make(chan struct{})
	go func() {
		// The second waits, is told busy, tries again: release the first
		// once it has.
		for calls.Load() == 1 {
			time.Sleep(10 * time.Millisecond)
		}
		close(busy)
	}()
	go func() {
		time.Sleep(decodeWait + time.Second)
		close(release)
	}()
	if _, err := Dial(dialCtx(t), DialOptions{Addr: addrOf(w), Agent: "h2", Job: "j1", TLS: clientTLS(ca), Munge: mungeFn}); err != nil {
		t.Fatalf("the second agent: %v", err)
	}
	<-busy
	if e := next(t, events, 5*time.Second); !e.Up || e.Agent != "h2" {
		t.Fatalf("%+v", e)
	}
	if err := <-first; err == nil || !strings.Contains(err.Error(), "held") {
		t.Fatalf("the first agent: %v", err)
	}
}

// FuzzPlausible: whatever a peer sends as a credential, the cheap checks
// refuse it or pass one of munge's shape and a size that fits the
// payload, never a panic.
func FuzzPlausible(f *testing.F) {
	f.Add([]byte(fakeCred(0, []byte("monarch-link j1 h1 00 00"))), 24)
	f.Add([]byte("MUNGE:AwQFAACDd0NuE7kXJX149FZCaE9Xo8s8p/dQy/WCDAb0E4h7D9lYfD29qd61Jy5WEdKCQqzVjUvtNbAZZKl66JT3nHHZ7mWV3UUVpv5rhuiSwgy/LjNIb4i8wnYtprkyO5tixJA=:"), 0)
	f.Add([]byte("MUNGE::"), 10)
	f.Add([]byte("MUNGE:AwQFAP8=:"), 10)
	f.Add([]byte("MUNGE:====:"), 1)
	f.Add([]byte(strings.TrimPrefix(string(fakeCred(0, []byte("x"))), "MUNGE:")), 1) // no armor before
	f.Fuzz(func(t *testing.T, cred []byte, payloadLen int) {
		payloadLen = max(0, payloadLen%4096)
		if plausible(cred, payloadLen) != nil {
			return
		}
		body, pre := strings.CutPrefix(string(cred), "MUNGE:")
		body, suf := strings.CutSuffix(body, ":")
		raw, err := base64.StdEncoding.DecodeString(body)
		if !pre || !suf || err != nil || len(raw) < minCredOverhead || len(raw) > payloadLen+maxCredOverhead || raw[0] != credVersion || int(raw[4])+minCredOverhead > len(raw) {
			t.Fatalf("passed %q for %d bytes", cred, payloadLen)
		}
	})
}

var _ = net.Dial
