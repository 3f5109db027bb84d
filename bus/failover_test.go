package bus_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
)

// hubEnv carries, to the hub server process, the token and the route URL
// of the server it joins.
const hubEnv = "BUS_TEST_HUB_PROCESS"

// TestHubServerProcess is the process of the hub server that
// TestHubServerKilled kills: it joins the hub, says where it listens
// ("HUB <client URL> <leaf URL>") and runs until killed, or until its
// stdin closes (the test ended).
func TestHubServerProcess(t *testing.T) {
	spec := os.Getenv(hubEnv)
	if spec == "" {
		t.Skip("the hub server process of TestHubServerKilled")
	}
	token, route, _ := strings.Cut(spec, " ")
	s, err := bus.StartServer(bus.ServerOptions{Token: token, Leaves: &bus.Listen{}, Cluster: &bus.Cluster{Routes: []string{route}}})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("HUB %s %s\n", s.URL(), s.LeafURL())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// startHubProcess starts a hub server in a process of its own, joined to
// first, and returns the process and the server's client and leaf URLs.
func startHubProcess(t *testing.T, first *bus.Server) (*exec.Cmd, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHubServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), hubEnv+"="+first.Token()+" "+first.RouteURL())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "HUB ") || strings.HasPrefix(sc.Text(), "ERROR ") {
				line <- sc.Text()
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		f := strings.Fields(l)
		if f[0] != "HUB" || len(f) != 3 {
			t.Fatalf("hub server process: %s", l)
		}
		return cmd, f[1], f[2]
	case <-time.After(20 * time.Second):
		t.Fatal("the hub server process did not start within 20s")
	}
	return nil, "", ""
}

// linkLog records a link's changes: how many times it went down and came
// back.
type linkLog struct {
	mu         sync.Mutex
	down, back int
}

func (l *linkLog) change(up bool, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if up {
		l.back++
	} else {
		l.down++
	}
}

func (l *linkLog) recovered() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down > 0 && l.back >= l.down
}

// seqs records, per receiving subject and sender, the numbers received.
type seqs struct {
	mu  sync.Mutex
	got map[string][]int // "subject sender" -> numbers in arrival order
}

func (s *seqs) take(m bus.Message) {
	sender, n, _ := strings.Cut(string(m.Data), " ")
	v, err := strconv.Atoi(n)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.got[m.Subject+" "+sender] = append(s.got[m.Subject+" "+sender], v)
	s.mu.Unlock()
}

func (s *seqs) last(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.got[key]
	if len(g) == 0 {
		return 0
	}
	return g[len(g)-1]
}

// TestHubServerKilled kills (SIGKILL), or stops (SIGSTOP: silent), one
// of a hub's two servers, a process of its own, while three connections
// send each other numbered streams: one on a leaf linked to the doomed server (it must move to the
// other), one on a leaf of the live server, and one connected to the
// doomed server itself (it must move to the live one). Each connection
// subscribes to a fresh subject every 50 messages, so its publishes probe
// the hub's servers (HubServers 2) before, across and after the kill: no
// publish may wait past HubSyncBound (with a second of slack), the leaf
// and the connection must be back on the live server, and every message
// sent once they are must arrive, once, in order. What was on the way
// through the dead server may be lost (the reliable layer of the runtime
// resends it); nothing may arrive twice or out of order.
func TestHubServerKilled(t *testing.T) {
	t.Run("killed", func(t *testing.T) { hubServerLost(t, syscall.SIGKILL) })
	// Stopped, the server holds its connections open and answers
	// nothing: its peers drop their routes to it after RouteStale, the
	// connection's pings go unanswered; its leaf, whose silence its
	// kernel refutes (it still takes connections: late, not lost), moves
	// when its pings go unanswered (LeafMaxPingsOut).
	t.Run("silent", func(t *testing.T) { hubServerLost(t, syscall.SIGSTOP) })
}

// hubServerLost is TestHubServerKilled with the hub server's process
// sent sig.
func hubServerLost(t *testing.T, sig syscall.Signal) {
	token := bus.NewToken()
	s0 := startServer(t, bus.ServerOptions{Token: token, Leaves: &bus.Listen{}, Cluster: &bus.Cluster{}})
	proc, client1, leaf1 := startHubProcess(t, s0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s0.AwaitRoutes(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var leafA, connC linkLog
	a, err := bus.StartLeaf(ctx, bus.Hub{URLs: []string{leaf1, s0.LeafURL()}, Token: token, OnLink: leafA.change}, bus.ServerOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Shutdown)
	b := startLeaf(t, token, s0)
	if s0.NumLeafNodes() != 1 {
		t.Fatalf("the live server holds %d leaves, want 1 (b)", s0.NumLeafNodes())
	}

	opts := bus.ConnOptions{Token: token, HubServers: 2, ReconnectFor: 10 * time.Second}
	connect := func(url string, o bus.ConnOptions) *bus.Conn {
		c, err := bus.Connect(url, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	withLink := opts
	withLink.OnLink = connC.change
	conns := map[string]*bus.Conn{
		"a": connect(a.URL(), opts),     // on the leaf that moves
		"b": connect(b.URL(), opts),     // on the live server's leaf
		"c": connect(client1, withLink), // on the doomed server, which names the other
	}
	got := &seqs{got: map[string][]int{}}
	for name, c := range conns {
		if _, err := c.Subscribe("to." + name); err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); c.Run(runCtx, got.take) }()
		t.Cleanup(func() { stop(); <-done })
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Each sender sends to the two others, a number per destination,
	// until told to stop; it records its longest Publish and its numbers.
	type sender struct {
		sent    map[string]int // destination -> last number sent
		longest time.Duration
		err     error
	}
	var (
		mu      sync.Mutex
		senders = map[string]*sender{}
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for name, c := range conns {
		s := &sender{sent: map[string]int{}}
		senders[name] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%50 == 0 {
					if _, err := c.Subscribe(fmt.Sprintf("fresh.%s.%d", name, i)); err != nil {
						mu.Lock()
						s.err = err
						mu.Unlock()
						return
					}
				}
				for dest := range conns {
					if dest == name {
						continue
					}
					mu.Lock()
					n := s.sent[dest] + 1
					mu.Unlock()
					start := time.Now()
					err := c.Publish("to."+dest, []byte(name+" "+strconv.Itoa(n)))
					took := time.Since(start)
					mu.Lock()
					s.sent[dest] = n
					s.longest = max(s.longest, took)
					if err != nil && s.err == nil {
						s.err = fmt.Errorf("publish %d to %s: %w", n, dest, err)
					}
					mu.Unlock()
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	if err := proc.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var leafMoved, connMoved time.Duration
	for !leafA.recovered() || !connC.recovered() || s0.NumLeafNodes() != 2 {
		if leafMoved == 0 && leafA.recovered() && s0.NumLeafNodes() == 2 {
			leafMoved = time.Since(killed)
		}
		if connMoved == 0 && connC.recovered() {
			connMoved = time.Since(killed)
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("30s after the kill: leaf a back %v, conn c back %v (%+v), live server's leaves %d (want 2)",
				leafA.recovered(), connC.recovered(), &connC, s0.NumLeafNodes())
		}
		time.Sleep(10 * time.Millisecond)
	}
	moved := time.Since(killed)
	if leafMoved == 0 {
		leafMoved = moved
	}
	if connMoved == 0 {
		connMoved = moved
	}
	// From here every message must come: note where each stream is,
	// after the first probe of a subscription made now.
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	mark := map[string]int{}
	for name, s := range senders {
		for dest, n := range s.sent {
			mark["to."+dest+" "+name] = n + 1
		}
	}
	mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	for name, s := range senders {
		if s.err != nil {
			t.Errorf("sender %s: %v", name, s.err)
		}
		if s.longest > bus.HubSyncBound+time.Second {
			t.Errorf("sender %s: a publish took %v, past the bound %v", name, s.longest, bus.HubSyncBound)
		}
		t.Logf("sender %s: sent %v, longest publish %v", name, s.sent, s.longest.Round(time.Microsecond))
	}
	// Every stream's last message arrives (bounded).
	wait := time.Now().Add(10 * time.Second)
	for name, s := range senders {
		for dest, n := range s.sent {
			key := "to." + dest + " " + name
			for got.last(key) != n && time.Now().Before(wait) {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	for name, s := range senders {
		for dest, n := range s.sent {
			key := "to." + dest + " " + name
			g := got.got[key]
			lost := 0
			prev := 0
			for _, v := range g {
				if v <= prev {
					t.Errorf("%s: %d after %d (repeated or out of order)", key, v, prev)
				}
				lost += v - prev - 1
				prev = v
			}
			lost += n - prev
			// From the mark on: all of them.
			var after []int
			for _, v := range g {
				if v >= mark[key] {
					after = append(after, v)
				}
			}
			if want := n - mark[key] + 1; len(after) != want {
				t.Errorf("%s: %d of the %d messages sent after both moved arrived", key, len(after), want)
			}
			t.Logf("%s: %d sent, %d lost across the kill", key, n, lost)
		}
	}
	t.Logf("%v: leaf on the live server after %v, connection after %v, both after %v", sig, leafMoved.Round(time.Millisecond),
		connMoved.Round(time.Millisecond), moved.Round(time.Millisecond))
}
