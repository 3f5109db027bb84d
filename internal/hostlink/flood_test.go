package hostlink

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/munge"
	"github.com/monarch-go/monarch/internal/testcluster"
)

// floodConns is how many connections a flood holds at once.
const floodConns = 10000

// flood is the flooding process (HOSTLINK_TEST_FLOOD=addr): conns
// connections to the watcher at addr, each dialed again as soon as it
// ends, a third of them idle, a third sending a MUNGE hello with cred (a
// real credential of another user: it must be decoded to be refused), a
// third one that is no credential. It says how many it dialed every 200
// ms, and ends when its stdin does (its parent gone).
func flood(addr string, conns int, cred string) {
	var dials, answered atomic.Int64
	conf := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	for i := range conns {
		go func() {
			for {
				if floodOnce(addr, i, conf, cred) {
					answered.Add(1)
				}
				dials.Add(1)
			}
		}()
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		time.Sleep(200 * time.Millisecond)
		fmt.Printf("FLOOD %d %d\n", dials.Load(), answered.Load())
	}
}

// floodOnce makes one connection of the flood's kind i and reports
// whether the watcher answered its hello.
func floodOnce(addr string, i int, conf *tls.Config, cred string) bool {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		time.Sleep(10 * time.Millisecond) // out of ports, say
		return false
	}
	defer func() {
		c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT: the ports last
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(time.Minute))
	if i%3 == 0 {
		io.Copy(io.Discard, c) // idle until dropped
		return false
	}
	tc := tls.Client(c, conf)
	var challenge [challengeLen]byte
	if _, err := io.ReadFull(tc, challenge[:]); err != nil {
		return false
	}
	hello := fmt.Sprintf("f%d munge %s\nnone\n", i, cred)
	if i%3 == 2 {
		hello = fmt.Sprintf("f%d munge MUNGE:AwQFAAA=:\nnone\n", i)
	}
	if _, err := io.WriteString(tc, hello); err != nil {
		return false
	}
	line, _ := bufio.NewReader(tc).ReadString('\n')
	return line != ""
}

// floodProc is a flood running as the cluster's other user.
type floodProc struct {
	proc  *os.Process
	dials atomic.Int64
}

// pause stops the flood's process (its connections stay, silent), and
// resume lets it go on.
func (f *floodProc) pause() error  { return f.proc.Signal(syscall.SIGSTOP) }
func (f *floodProc) resume() error { return f.proc.Signal(syscall.SIGCONT) }

// startFlood floods addr from host as the cluster's other user, with a
// credential that user made, and returns once the flood has dialed
// floodConns connections. It ends with the test.
func startFlood(t testing.TB, c *testcluster.Cluster, host, addr string) *floodProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	// The test binary, where the other user may run it.
	dir, err := os.MkdirTemp("", "hostlink-flood-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "flood")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(c.Base, "munge", "run", "munge.socket")
	cred, err := c.AsOther(ctx, host, "munge", "--socket", sock, "--no-input").Output()
	if err != nil {
		t.Fatalf("munge as %s on %s: %v", c.Other.Name, host, err)
	}
	cmd := c.AsOther(ctx, host, "sh", "-c", `ulimit -n 20000 && exec "$@"`, "sh",
		"env", "HOSTLINK_TEST_FLOOD="+addr, "HOSTLINK_TEST_FLOOD_CONNS="+strconv.Itoa(floodConns),
		"HOSTLINK_TEST_FLOOD_CRED="+strings.TrimSpace(string(cred)), bin, "-test.run=^$")
	stdin, err := cmd.StdinPipe() // its end ends the flood
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	f := &floodProc{proc: cmd.Process}
	on := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			var dials, answered int64
			if _, err := fmt.Sscanf(s.Text(), "FLOOD %d %d", &dials, &answered); err == nil {
				if f.dials.Swap(dials) < floodConns && dials >= floodConns {
					close(on)
				}
			}
		}
	}()
	select {
	case <-on:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the flood from %s dialed %d connections in 2 minutes, not %d", host, f.dials.Load(), floodConns)
	}
	return f
}

// floodWatcher is a watcher of job j1 on this machine's address on the
// cluster's network, over TLS, that decodes MUNGE credentials with the
// cluster's munged; agent is how an agent here is admitted by it, with
// a MUNGE proof (as under Slurm), from a source the flood's is not.
func floodWatcher(t testing.TB, c *testcluster.Cluster) (w *Watcher, agent func(ctx context.Context, id string) error) {
	t.Helper()
	sock := filepath.Join(c.Base, "munge", "run", "munge.socket")
	ca := newCA(t, "j1")
	kp, err := ca.IssueTLS("hub", []string{c.Advertise})
	if err != nil {
		t.Fatal(err)
	}
	w, _ = startWatcher(t, WatcherOptions{Host: c.Advertise, Job: "j1",
		TLS:     &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS13},
		OnEvent: func(Event) {},
		Unmunge: func(ctx context.Context, cred []byte) (uint32, []byte, error) {
			m, err := munge.Decode(ctx, sock, cred)
			return m.UID, m.Payload, err
		}})
	addr := net.JoinHostPort(c.Advertise, strconv.Itoa(w.Port()))
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: c.Advertise, MinVersion: tls.VersionTLS13}
	encode := func(ctx context.Context, payload []byte) ([]byte, error) {
		return munge.Encode(ctx, sock, payload, os.Getuid())
	}
	return w, func(ctx context.Context, id string) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // the link ends once admitted
		adm, err := Dial(ctx, DialOptions{Addr: addr, Agent: id, Job: "j1", TLS: conf, Munge: encode})
		if err == nil && adm.Token != "secret" {
			err = fmt.Errorf("admitted with token %q", adm.Token)
		}
		return err
	}
}

// Under a flood of 10,000 connections from another user on h1 (idle,
// sending another user's real MUNGE credential, sending garbage), kept
// up as fast as they are dropped, agents from elsewhere are admitted
// with their MUNGE proof, one after another; the watcher never holds
// more handshakes than its bounds, of all and of one source.
func TestAdmissionUnderFlood(t *testing.T) {
	c := testcluster.Get(t)
	w, agent := floodWatcher(t, c)
	f := startFlood(t, c, "h1", net.JoinHostPort(c.Advertise, strconv.Itoa(w.Port())))
	var most, mostOfOne atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			total, one := w.gate.pendingCounts()
			most.Store(max(most.Load(), int64(total)))
			mostOfOne.Store(max(mostOfOne.Load(), int64(one)))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		err := agent(ctx, "a"+strconv.Itoa(i))
		cancel()
		if err != nil {
			t.Fatalf("agent %d under the flood: %v", i, err)
		}
		t.Logf("agent %d admitted in %v", i, time.Since(start).Round(time.Millisecond))
	}
	close(stop)
	<-sampled
	t.Logf("the flood dialed %d connections; at most %d handshakes at once, %d of one source", f.dials.Load(), most.Load(), mostOfOne.Load())
	if most.Load() > maxPending || mostOfOne.Load() > maxPendingPerSource {
		t.Errorf("%d handshakes at once, %d of one source: over the bounds %d, %d", most.Load(), mostOfOne.Load(), maxPending, maxPendingPerSource)
	}
}

// BenchmarkAdmissionUnderFlood: an agent's admission with a MUNGE proof
// (TLS, munge, unmunge, the answer), from this machine, under the flood
// of TestAdmissionUnderFlood from h1, beside the floor of the same run:
// the same admissions while the flood is stopped (SIGSTOP) and the
// watcher has no handshake of it left. Five rounds of each, in turn, so
// that both see the machine's other load alike. Milliseconds, medians of
// 25.
func BenchmarkAdmissionUnderFlood(b *testing.B) {
	c := testcluster.Get(b)
	w, agent := floodWatcher(b, c)
	f := startFlood(b, c, "h1", net.JoinHostPort(c.Advertise, strconv.Itoa(w.Port())))
	var quiet, flooded []float64
	admit := func(into *[]float64, tag string) {
		for i := range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			start := time.Now()
			err := agent(ctx, fmt.Sprintf("%s%d-%d", tag, len(*into), i))
			cancel()
			if err != nil {
				b.Fatalf("agent %s: %v", tag, err)
			}
			*into = append(*into, float64(time.Since(start).Microseconds())/1000)
		}
	}
	for range 5 {
		if err := f.pause(); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(2 * helloWait)
		for total, _ := w.gate.pendingCounts(); total > 0; total, _ = w.gate.pendingCounts() {
			if time.Now().After(deadline) {
				b.Fatalf("%d handshakes still under way %v after the flood stopped", total, 2*helloWait)
			}
			time.Sleep(10 * time.Millisecond)
		}
		admit(&quiet, "quiet")
		if err := f.resume(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Second) // the flood at full strength again
		admit(&flooded, "flood")
	}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	ours, floor := median(flooded), median(quiet)
	fmt.Printf("BENCH hostlink-admission-under-flood-%dconns-ms ours=%.1f floor=%.1f ratio=%.2f target<=2\n", floodConns, ours, floor, ours/floor)
}
