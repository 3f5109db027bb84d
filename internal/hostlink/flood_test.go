package hostlink

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/munge"
	"github.com/monarch-go/monarch/internal/testcluster"
)

// floodConns is how many connections a flood holds at once.
const floodConns = 10000

// The floods a test or benchmark may send (HOSTLINK_TEST_FLOOD_KIND).
const (
	// silentFlood's connections send nothing.
	silentFlood = "silent"
	// activeFlood's shake hands (TLS) and send a MUNGE hello: half with
	// a real credential of another user, replayed (it must be decoded to
	// be refused), half with one that is no credential.
	activeFlood = "active"
	// mixedFlood is a third of each: silent, replayed, garbage.
	mixedFlood = "mixed"
)

// flood is the flooding process (HOSTLINK_TEST_FLOOD=addr): conns
// connections to the watcher at addr, of kind, each dialed again as soon
// as it ends. It says every 200 ms how many connections it opened, how
// many hellos were answered and the processor time it took, and ends
// when its stdin does (its parent gone).
func flood(addr string, conns int, cred, kind string) {
	var dials, answered atomic.Int64
	conf := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	for i := range conns {
		what := i % 3 // 0 silent, 1 replayed, 2 garbage
		switch kind {
		case silentFlood:
			what = 0
		case activeFlood:
			what = 1 + i%2
		}
		go func() {
			for {
				if floodOnce(addr, i, what, conf, cred, &dials) {
					answered.Add(1)
				}
			}
		}()
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		time.Sleep(200 * time.Millisecond)
		fmt.Printf("FLOOD %d %d %d\n", dials.Load(), answered.Load(), cpuTime().Milliseconds())
	}
}

// floodOnce makes one connection of the flood, i, which is silent (what
// 0) or sends a replayed credential (1) or garbage (2), counts it in
// opened, and reports whether the watcher answered its hello.
func floodOnce(addr string, i, what int, conf *tls.Config, cred string, opened *atomic.Int64) bool {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		time.Sleep(10 * time.Millisecond) // out of ports, say
		return false
	}
	opened.Add(1)
	defer func() {
		c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT: the ports last
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(time.Minute))
	if what == 0 {
		io.Copy(io.Discard, c) // idle until dropped
		return false
	}
	tc := tls.Client(c, conf)
	var challenge [challengeLen]byte
	if _, err := io.ReadFull(tc, challenge[:]); err != nil {
		return false
	}
	hello := fmt.Sprintf("f%d munge %s\nnone\n", i, cred)
	if what == 2 {
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
	dials atomic.Int64 // the connections it opened
	cpu   atomic.Int64 // the processor time it took, ms
	stop  func()       // ends it, and waits for it
}

// cpuTime is the processor time this process took, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startFlood floods addr from host as the cluster's other user with
// floodConns connections of kind, with a credential that user made, and
// returns once the flood has opened them all. It ends with the test, or
// at stop.
func startFlood(t testing.TB, c *testcluster.Cluster, host, addr, kind string) *floodProc {
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
		"HOSTLINK_TEST_FLOOD_CRED="+strings.TrimSpace(string(cred)), "HOSTLINK_TEST_FLOOD_KIND="+kind, bin, "-test.run=^$")
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
	var once sync.Once
	f := &floodProc{stop: func() {
		once.Do(func() {
			stdin.Close()
			cmd.Process.Kill()
			cmd.Wait()
		})
	}}
	t.Cleanup(f.stop)
	on := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			var dials, answered, cpu int64
			if _, err := fmt.Sscanf(s.Text(), "FLOOD %d %d %d", &dials, &answered, &cpu); err == nil {
				f.cpu.Store(cpu)
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

// floodTarget is a watcher of job j1 on this machine's address on the
// cluster's network, over TLS, that decodes MUNGE credentials with the
// cluster's munged, and how an agent is admitted by it.
type floodTarget struct {
	w     *Watcher
	agent agentConf

	mu      sync.Mutex
	decodes []float64 // how long each unmunge took, ms
}

// agentConf is how an agent of job j1 reaches a flood target and proves
// itself: with a MUNGE proof, as under Slurm.
type agentConf struct {
	Addr, CAPEM, ServerName, Socket string
}

func floodWatcher(t testing.TB, c *testcluster.Cluster) *floodTarget {
	t.Helper()
	sock := filepath.Join(c.Base, "munge", "run", "munge.socket")
	ca := newCA(t, "j1")
	kp, err := ca.IssueTLS("hub", []string{c.Advertise})
	if err != nil {
		t.Fatal(err)
	}
	ft := &floodTarget{}
	ft.w, _ = startWatcher(t, WatcherOptions{Host: c.Advertise, Job: "j1",
		TLS:     &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS13},
		OnEvent: func(Event) {},
		Unmunge: func(ctx context.Context, cred []byte) (uint32, []byte, error) {
			start := time.Now()
			m, err := munge.Decode(ctx, sock, cred)
			ft.mu.Lock()
			ft.decodes = append(ft.decodes, float64(time.Since(start).Microseconds())/1000)
			ft.mu.Unlock()
			return m.UID, m.Payload, err
		}})
	ft.agent = agentConf{Addr: net.JoinHostPort(c.Advertise, strconv.Itoa(ft.w.Port())), CAPEM: string(ca.CertPEM()), ServerName: c.Advertise, Socket: sock}
	return ft
}

// takeDecodes is how long each unmunge took since the last call, ms.
func (ft *floodTarget) takeDecodes() []float64 {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	d := ft.decodes
	ft.decodes = nil
	return d
}

// admit admits agent id, then ends its link.
func (a agentConf) admit(ctx context.Context, id string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(a.CAPEM))
	conf := &tls.Config{RootCAs: pool, ServerName: a.ServerName, MinVersion: tls.VersionTLS13}
	encode := func(ctx context.Context, payload []byte) ([]byte, error) {
		return munge.Encode(ctx, a.Socket, payload, os.Getuid())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the link ends once admitted
	adm, err := Dial(ctx, DialOptions{Addr: a.Addr, Agent: id, Job: "j1", TLS: conf, Munge: encode})
	if err == nil && adm.Token != "secret" {
		err = fmt.Errorf("admitted with token %q", adm.Token)
	}
	return err
}

// agents is the agents' process (HOSTLINK_TEST_AGENTS, an agentConf in
// JSON): for each id read on its stdin it admits that agent and says
// "<ms>", how long its admission took, or "error <why>".
func agents(conf string) {
	var a agentConf
	if err := json.Unmarshal([]byte(conf), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := bufio.NewScanner(os.Stdin)
	for s.Scan() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		err := a.admit(ctx, s.Text())
		cancel()
		if err != nil {
			fmt.Printf("error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Printf("%.3f\n", float64(time.Since(start).Microseconds())/1000)
	}
	os.Exit(0)
}

// agentsProc is an agents process of this machine: as an agent is, a
// process of its own, which holds none of the watcher's descriptors.
type agentsProc struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// startAgents starts an agents process for a; it ends with the test.
func startAgents(t testing.TB, a agentConf) *agentsProc {
	t.Helper()
	conf, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	_, in, out := startChild(t, "HOSTLINK_TEST_AGENTS="+string(conf))
	return &agentsProc{in: in, out: bufio.NewScanner(out)}
}

// admit has the agents process admit agent id, and returns how long it
// took, ms: a minute at most, the agent's own bound.
func (p *agentsProc) admit(id string) (float64, error) {
	if _, err := fmt.Fprintln(p.in, id); err != nil {
		return 0, err
	}
	if !p.out.Scan() {
		return 0, fmt.Errorf("the agents process ended: %v", p.out.Err())
	}
	line := p.out.Text()
	if why, ok := strings.CutPrefix(line, "error "); ok {
		return 0, errors.New(why)
	}
	return strconv.ParseFloat(line, 64)
}

// Under a flood of 10,000 connections from another user on h1 (idle,
// sending another user's real MUNGE credential, sending garbage), kept
// up as fast as they are dropped, agents from elsewhere are admitted
// with their MUNGE proof, one after another; the watcher never holds
// more handshakes than its bounds, of all and of one source, and the
// flood does not churn: the watcher holds its connections, and reads
// those of its failing source a few at a time, rather than cut them for
// the flood to open again (32 dials a second here; before the door, the
// watcher reset what passed its bounds, and the flood dialed 16,000 a
// second).
func TestAdmissionUnderFlood(t *testing.T) {
	c := testcluster.Get(t)
	ft := floodWatcher(t, c)
	w := ft.w
	f := startFlood(t, c, "h1", ft.agent.Addr, mixedFlood)
	time.Sleep(time.Second) // its first dials answered
	var most, mostOfOne atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			n := w.door.Counts()
			most.Store(max(most.Load(), int64(n.Reading)))
			mostOfOne.Store(max(mostOfOne.Load(), int64(n.MostReading)))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	start, dials := time.Now(), f.dials.Load()
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t0 := time.Now()
		err := ft.agent.admit(ctx, "a"+strconv.Itoa(i))
		cancel()
		if err != nil {
			t.Fatalf("agent %d under the flood: %v", i, err)
		}
		t.Logf("agent %d admitted in %v", i, time.Since(t0).Round(time.Millisecond))
	}
	time.Sleep(max(0, 3*time.Second-time.Since(start))) // a few penalties' worth at least
	redials := float64(f.dials.Load()-dials) / time.Since(start).Seconds()
	close(stop)
	<-sampled
	t.Logf("the flood dialed %d connections, %.0f a second while agents were admitted; the door %+v; at most %d handshakes at once, %d of one source",
		f.dials.Load(), redials, w.door.Counts(), most.Load(), mostOfOne.Load())
	if most.Load() > maxPending || mostOfOne.Load() > maxPendingPerSource {
		t.Errorf("%d handshakes at once, %d of one source: over the bounds %d, %d", most.Load(), mostOfOne.Load(), maxPending, maxPendingPerSource)
	}
	// What the door lets go: each silent one once in holdWait at most, and
	// of a penalized source a source's share of readers each penalty.
	if most := 2 * (floodConns/holdWait.Seconds() + maxPendingPerSource/penaltyMost.Seconds()); redials > most {
		t.Errorf("the flood dialed %.0f connections a second, more than %.0f: the watcher cuts what it should hold", redials, most)
	}
}

// BenchmarkAdmissionUnderFlood: an agent's admission with a MUNGE proof
// (TLS, munge, unmunge, the answer), from a process of this machine (an
// agent is a process of its own: it holds none of the watcher's
// descriptors), under a flood of 10,000 connections from h1 of the
// cluster's other user, beside the floor of the same run: the same
// admissions without the flood, before it and after it (its process
// ended, the watcher holding none of its connections). Two floods, one
// after the other: silent, and active (TLS handshakes and MUNGE hellos,
// half with another user's credential replayed, half garbage).
// Admissions 250 ms apart: 10 s of them without the flood, 65 s with it
// (in which the watcher lets go of every silent connection it holds,
// between holdWait and twice that, and the flood opens another), 10 s
// without. Milliseconds, medians; the log has the 90th percentiles, the
// watcher's unmunge and the processor time each side took.
func BenchmarkAdmissionUnderFlood(b *testing.B) {
	c := testcluster.Get(b)
	ft := floodWatcher(b, c)
	w := ft.w
	agents := startAgents(b, ft.agent)
	n := 0
	// admissions admits agents for d, and says the processor time this
	// process took meanwhile, a share of one core.
	admissions := func(d time.Duration) (ms []float64, cpu float64) {
		cpu0, t0 := cpuTime(), time.Now()
		defer func() { cpu = float64(cpuTime()-cpu0) / float64(time.Since(t0)) }()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
			n++
			took, err := agents.admit("a" + strconv.Itoa(n))
			if err != nil {
				b.Fatalf("agent %d: %v", n, err)
			}
			ms = append(ms, took)
		}
		return ms, 0 // cpu: said by the deferred func
	}
	for _, kind := range []string{silentFlood, activeFlood} {
		ft.takeDecodes()
		floor, floorCPU := admissions(10 * time.Second)
		before := w.door.Counts()
		f := startFlood(b, c, "h1", ft.agent.Addr, kind)
		time.Sleep(2 * time.Second) // its first dials answered
		ft.takeDecodes()
		dials, floodCPU, start := f.dials.Load(), f.cpu.Load(), time.Now()
		ours, oursCPU := admissions(65 * time.Second)
		took := time.Since(start)
		redials := float64(f.dials.Load()-dials) / took.Seconds()
		floodCPU = f.cpu.Load() - floodCPU
		during := w.door.Counts()
		oursDecodes := ft.takeDecodes()
		f.stop()
		waitFor(b, "the watcher to let go of the flood", func() bool {
			n := w.door.Counts()
			return n.Held+n.Waiting+n.Reading == 0
		})
		ft.takeDecodes()
		after, afterCPU := admissions(10 * time.Second)
		floor = append(floor, after...)
		floorDecodes := ft.takeDecodes()
		b.Logf("%s flood: %d admissions under it: median %.1f ms, 90th percentile %.1f, most %.1f; %d without: %.1f, %.1f, %.1f; the watcher's unmunge %.1f ms under it (%d, the flood's too), %.1f without; the flood re-dialed %.0f connections a second; the door entered %d, displaced %d, let go %d of them; this process took %.0f%% of a core under the flood, %.0f%% and %.0f%% without; the flood %.0f%%",
			kind, len(ours), median(ours), percentile(ours, 0.9), slices.Max(ours), len(floor), median(floor), percentile(floor, 0.9), slices.Max(floor),
			median(oursDecodes), len(oursDecodes), median(floorDecodes),
			redials, during.Entered-before.Entered, during.Displaced-before.Displaced, during.Expired-before.Expired,
			100*oursCPU, 100*floorCPU, 100*afterCPU, 100*float64(floodCPU)/float64(took.Milliseconds()))
		om, fm := median(ours), median(floor)
		fmt.Printf("BENCH hostlink-admission-flood10k-%s-ms ours=%.1f floor=%.1f ratio=%.2f target<=2\n", kind, om, fm, om/fm)
	}
}

// median is v's median; it sorts v.
func median(v []float64) float64 { return percentile(v, 0.5) }

// percentile is v's p-th percentile, the nearest rank (NaN if v is
// empty); it sorts v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(p*float64(len(v))))]
}
