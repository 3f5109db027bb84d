package jobctl

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

func TestMain(m *testing.M) {
	env := testenv.Setup()
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(env.Finish(code))
}

// dialAsOther is a python3 program that connects to the unix socket
// argv[1], sends an echo request and prints what it gets back, or
// "refused: " and the error when it cannot connect.
const dialAsOther = `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("refused:", e); sys.exit(0)
try:
    s.sendall(b'{"op":"echo","body":"hi"}\n')
except BrokenPipeError:
    pass  # the server answered and closed before reading
print("answer:", s.makefile().readline().strip())
`

// TestSocketRefusesOtherUser: another user of the host reaches no job's
// control socket. Its folder keeps them out (connect is refused); and
// where the folders around it were opened up (a mistake of the user's),
// the server still refuses them by the uid the kernel names, and runs
// nothing of theirs.
func TestSocketRefusesOtherUser(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ran atomic.Int32
	ops := map[string]Op{"echo": {Handle: func(ctx context.Context, body json.RawMessage) (any, error) {
		ran.Add(1)
		return "HI", nil
	}}}
	// Under /tmp itself: the test's TMPDIR is private to root, which would
	// keep the other user out before the socket's own folder could.
	top, err := os.MkdirTemp("/tmp", "jobctl-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	dir := filepath.Join(top, "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	path := SocketPath(dir, "job1")
	s, err := Listen(path, ops)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dial := func() string {
		t.Helper()
		out, err := c.AsOther(ctx, "", "/usr/bin/python3", "-c", dialAsOther, path).CombinedOutput()
		if err != nil {
			t.Fatalf("as %s: %v: %s", c.Other.Name, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := dial(); !strings.HasPrefix(got, "refused:") || !strings.Contains(got, "Permission denied") {
		t.Errorf("as %s, through the private folder: %q, want a refused connect", c.Other.Name, got)
	}
	// The folder and the socket opened to everyone: the server's own
	// check is what stands.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	got := dial()
	if !strings.HasPrefix(got, "answer:") || !strings.Contains(got, "refused: uid") || !strings.Contains(got, "is not the job's user") {
		t.Errorf("as %s, through opened folders: %q, want the server's refusal", c.Other.Name, got)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the op ran %d times for another user", n)
	}
	// The job's user still gets through.
	var answer string
	if err := Call(ctx, path, "echo", "hi", &answer); err != nil || answer != "HI" {
		t.Errorf("the job's user: %q, %v", answer, err)
	}
}
