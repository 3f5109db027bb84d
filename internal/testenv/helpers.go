package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// FreePort is a loopback TCP port that was free a moment ago, for a
// server a test starts in another process (which binds it itself).
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StalledServer is the address of a loopback TCP server that accepts
// every connection and never reads or answers, until the test ends: a
// peer that hangs, for the tests of what bounds a wait on one.
func StalledServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// SyncBuffer is a bytes.Buffer safe for several writers (a command's
// goroutines, a child's pipes) and the test that reads it.
type SyncBuffer struct {
	// Limit bounds what it keeps: past it, writes are dropped (and
	// reported written). 0: no bound.
	Limit int

	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Limit > 0 && s.b.Len() >= s.Limit {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WriteFile writes a file in dir and returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ShJob writes dir/job.toml, a job file whose program is sh -c script, on
// this machine unless hostsFile is set, and returns its path.
func ShJob(t testing.TB, dir, script, hostsFile string) string {
	t.Helper()
	content := fmt.Sprintf("program = \"/bin/sh\"\nargs = [\"-c\", %q]\n", script)
	if hostsFile != "" {
		content += fmt.Sprintf("hosts = %q\n", hostsFile)
	}
	return WriteFile(t, dir, "job.toml", content)
}
