package jobctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func echoOps() map[string]Op {
	return map[string]Op{
		"echo": {Handle: func(ctx context.Context, body json.RawMessage) (any, error) {
			var s string
			if err := json.Unmarshal(body, &s); err != nil {
				return nil, err
			}
			if s == "fail" {
				return nil, errors.New("asked to fail")
			}
			return strings.ToUpper(s), nil
		}},
		"hang": {
			Handle: func(ctx context.Context, body json.RawMessage) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			},
			Bound: func(json.RawMessage) time.Duration { return 50 * time.Millisecond },
		},
	}
}

func TestServeAndCall(t *testing.T) {
	dir := t.TempDir()
	path := SocketPath(dir, "job1")
	if path != filepath.Join(dir, "job1.sock") {
		t.Fatalf("SocketPath = %s", path)
	}
	s, err := Listen(path, echoOps())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got string
	if err := Call(ctx, path, "echo", "hi", &got); err != nil || got != "HI" {
		t.Fatalf("echo: %q, %v", got, err)
	}
	if err := Call(ctx, path, "echo", "fail", &got); err == nil || err.Error() != "asked to fail" {
		t.Errorf("a failing op: %v", err)
	}
	if err := Call(ctx, path, "nope", nil, nil); err == nil || !strings.Contains(err.Error(), `unknown op "nope"; this job serves echo, hang`) {
		t.Errorf("unknown op: %v", err)
	}
	if err := Call(ctx, path, "hang", nil, nil); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("an op past its bound: %v", err)
	}
	if err := Call(ctx, path, "echo", strings.Repeat("x", MaxRequest), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a request past the bound: %v", err)
	}
	// A line past the bound sent by hand is refused by the server.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go c.Write([]byte(strings.Repeat("x", 2*MaxRequest)))
	line, err := readLine(c, MaxAnswer)
	c.Close()
	if err != nil || !strings.Contains(string(line), "more than 1048576 bytes") {
		t.Errorf("an oversized request line: %q, %v", line, err)
	}
	// A second server of the same job is refused.
	if _, err := Listen(path, echoOps()); err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Errorf("a second Listen: %v", err)
	}
	s.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
	if err := Call(ctx, path, "echo", "hi", &got); !errors.Is(err, ErrNotServing) {
		t.Errorf("a call after Close: %v", err)
	}
}

// A socket left by a client that was killed is replaced.
func TestListenReplacesStaleSocket(t *testing.T) {
	path := SocketPath(t.TempDir(), "job2")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens
	s, err := Listen(path, echoOps())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, echoOps()); err == nil || !strings.Contains(err.Error(), "is no socket") {
		t.Errorf("Listen over a file: %v", err)
	}
}

// A state dir too deep for a socket path gets a short one in the private
// runtime dir; both halves find it.
func TestSocketPathTooLong(t *testing.T) {
	// A short TMPDIR, under /tmp itself: the test's own (testenv's) is too
	// deep for the short path to fit.
	short, err := os.MkdirTemp("/tmp", "jc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Setenv("TMPDIR", short)
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	p := SocketPath(deep, "job3")
	if len(p) > maxSocketPath || filepath.Dir(p) != RuntimeDir() || p != SocketPath(deep, "job3") || p == SocketPath(deep, "job4") {
		t.Fatalf("SocketPath of a deep dir: %s", p)
	}
	s, err := Listen(p, echoOps())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(RuntimeDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("runtime dir: %v %v", fi, err)
	}
	var got string
	if err := Call(context.Background(), p, "echo", "x", &got); err != nil || got != "X" {
		t.Errorf("echo: %q %v", got, err)
	}
}

// Listen leaves the process's umask alone: a folder another goroutine
// makes while sockets are being bound gets the mode it asked for, less
// the umask it had (the old way, umask 0177 around bind, made it 0600).
func TestListenKeepsUmask(t *testing.T) {
	dir := t.TempDir()
	want := 0o755 &^ umask(t)
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d := filepath.Join(dir, "d"+strconv.Itoa(i))
			if err := os.Mkdir(d, 0o755); err != nil {
				done <- err
				return
			}
			fi, err := os.Stat(d)
			if err == nil && fi.Mode().Perm() != want {
				done <- fmt.Errorf("a folder made during Listen is %04o, want %04o", fi.Mode().Perm(), want)
				return
			}
			os.Remove(d)
		}
	}()
	for i := 0; i < 2000; i++ {
		s, err := Listen(SocketPath(dir, "j"+strconv.Itoa(i)), echoOps())
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// umask reads this process's umask without setting it.
func umask(t *testing.T) os.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return os.FileMode(m)
		}
	}
	t.Fatal("no Umask in /proc/self/status")
	return 0
}
