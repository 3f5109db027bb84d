package testcluster_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monarch-go/monarch/internal/testcluster"
)

// sendEnv tells TestCaptureSendHelper, run on a host, what to send:
// "addr file split..." (the file's bytes to addr, each part up to a split
// sent and acknowledged before the next is written).
const sendEnv = "MONARCH_CAPTURE_SEND"

// randomText is n random bytes of the alphabet of rand.Text.
func randomText(n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(rand.Text())
	}
	return b.Bytes()[:n]
}

// TestCapture sends known strings from h1 to this machine over plain TCP
// and finds them in a capture of h1's link, also where a string was cut
// across segments; strings never sent are not found.
func TestCapture(t *testing.T) {
	c := testcluster.Get(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(c.Advertise, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	const mss = 1448 // MTU 1500, TCP timestamps
	short := []byte("short-" + rand.Text())
	big := randomText(3 << 20)
	atSeam := randomText(32) // across where segments of mss bytes meet
	long := randomText(4000) // longer than a segment
	offSeam, offLong := mss*700-5, 2_000_000
	copy(big[offSeam:], atSeam)
	copy(big[offLong:], long)
	never := []byte(rand.Text())
	nearMiss := bytes.Clone(atSeam)
	nearMiss[len(nearMiss)-1] ^= 1

	cp := c.Capture(t, "h1")
	sendFromHost(t, c, ln, "h1", short)
	// The veth carries GSO frames of many segments, which would hold
	// both strings whole: the sender cuts them where segments would meet.
	sendFromHost(t, c, ln, "h1", big, offSeam+5, offLong+mss-100, offLong+2*mss-100)
	cp.Stop()

	if cp.Frames() == 0 || cp.Bytes() < int64(len(big)) {
		t.Fatalf("the capture recorded %d frames, %d bytes: want at least the %d bytes sent", cp.Frames(), cp.Bytes(), len(big))
	}
	t.Logf("recorded %d frames, %d bytes", cp.Frames(), cp.Bytes())
	for _, tc := range []struct {
		name   string
		needle []byte
		want   bool
	}{
		{"short", short, true},
		{"at a seam", atSeam, true},
		{"long", long, true},
		{"never sent", never, false},
		{"near miss", nearMiss, false},
	} {
		if got := cp.Contains(tc.needle); got != tc.want {
			t.Errorf("Contains(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if cp.InOneFrame(atSeam) || cp.InOneFrame(long) {
		t.Error("a string cut by the sender is in one frame: the test shows nothing of reassembly")
	}
}

// sendFromHost has host send data to ln over plain TCP (TestCaptureSendHelper,
// run there over ssh), and checks that it arrived whole.
func sendFromHost(t *testing.T, c *testcluster.Cluster, ln net.Listener, host string, data []byte, splits ...int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := []string{ln.Addr().String(), file}
	for _, s := range splits {
		spec = append(spec, strconv.Itoa(s))
	}

	type result struct {
		got []byte
		err error
	}
	received := make(chan result, 1)
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second))
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			received <- result{nil, err}
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(60 * time.Second))
		got, err := io.ReadAll(conn)
		received <- result{got, err}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.SSH(ctx, host, exe, "-test.run=^TestCaptureSendHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), sendEnv+"="+strings.Join(spec, " ")) // ssh forwards MONARCH_*
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		ln.Close() // ends the Accept
		t.Fatalf("sender on %s: %v\n%s", host, err, out)
	}
	r := <-received
	if r.err != nil {
		t.Fatalf("receiving from %s: %v", host, r.err)
	}
	if !bytes.Equal(r.got, data) {
		t.Fatalf("received %d bytes from %s, not the %d sent", len(r.got), host, len(data))
	}
}

// TestCaptureSendHelper is the sender of sendFromHost, on a host.
func TestCaptureSendHelper(t *testing.T) {
	spec := strings.Fields(os.Getenv(sendEnv))
	if len(spec) < 2 {
		t.Skip("run by TestCapture on a host of the cluster")
	}
	data, err := os.ReadFile(spec[1])
	if err != nil {
		t.Fatal(err)
	}
	var ends []int
	for _, s := range spec[2:] {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n >= len(data) {
			t.Fatalf("bad split %q", s)
		}
		ends = append(ends, n)
	}
	ends = append(ends, len(data))
	conn, err := net.DialTimeout("tcp", spec[0], 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	conn.SetDeadline(deadline)
	rc, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	prev := 0
	for _, end := range ends {
		if _, err := conn.Write(data[prev:end]); err != nil {
			t.Fatal(err)
		}
		prev = end
		// Everything written is acknowledged, so sent: the next write
		// starts a new segment.
		for {
			var queued int
			var qerr error
			if err := rc.Control(func(fd uintptr) { queued, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
				t.Fatal(err)
			}
			if qerr != nil {
				t.Fatal(qerr)
			}
			if queued == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d bytes still unacknowledged", queued)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// Stop returns soon, under a flood of traffic too, and again at once;
// nothing is recorded after it.
func TestCaptureStop(t *testing.T) {
	c := testcluster.Get(t)

	idle := c.Capture(t, "h2")
	start := time.Now()
	idle.Stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Stop of an idle capture took %v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cp := c.Capture(t, "h1")
	// ssh's session traffic from h1, for longer than the test waits.
	flood := c.SSH(ctx, "h1", "head -c 2000000000 /dev/zero")
	flood.Stdout = io.Discard
	flood.WaitDelay = 2 * time.Second
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		flood.Wait()
	}()
	for deadline := time.Now().Add(20 * time.Second); cp.Bytes() < 10<<20; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the capture recorded %d bytes in 20 s of a flood", cp.Bytes())
		}
	}
	start = time.Now()
	cp.Stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop under a flood took %v", d)
	}
	frames, n := cp.Frames(), cp.Bytes()
	start = time.Now()
	cp.Stop()
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("a second Stop took %v", d)
	}
	time.Sleep(300 * time.Millisecond)
	if cp.Frames() != frames || cp.Bytes() != n {
		t.Errorf("recorded %d frames, %d bytes after Stop", cp.Frames()-frames, cp.Bytes()-n)
	}
}
