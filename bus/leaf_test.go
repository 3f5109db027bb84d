package bus_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
)

// startHub starts a server that takes leaves, with o's other options.
func startHub(t *testing.T, o bus.ServerOptions) *bus.Server {
	t.Helper()
	if o.Leaves == nil {
		o.Leaves = &bus.Listen{}
	}
	return startServer(t, o)
}

// startLeaf starts a leaf of the hub servers, with their token.
func startLeaf(t *testing.T, token string, hubs ...*bus.Server) *bus.Server {
	t.Helper()
	urls := make([]string, len(hubs))
	for i, h := range hubs {
		urls[i] = h.LeafURL()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := bus.StartLeaf(ctx, bus.Hub{URLs: urls, Token: token}, bus.ServerOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Shutdown)
	return l
}

// waitCount waits (10s at most) until n() == want.
func waitCount(t *testing.T, what string, want int, n func() int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, n(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeafCarriesBothWays: clients of two leaves and of the hub reach
// each other, and the hub holds one leaf connection per leaf.
func TestLeafCarriesBothWays(t *testing.T) {
	hub := startHub(t, bus.ServerOptions{})
	if !strings.HasPrefix(hub.LeafURL(), "nats-leaf://127.0.0.1:") {
		t.Fatalf("LeafURL = %q", hub.LeafURL())
	}
	a, b := startLeaf(t, hub.Token(), hub), startLeaf(t, hub.Token(), hub)
	if n := hub.NumLeafNodes(); n != 2 {
		t.Fatalf("hub holds %d leaf connections, want 2", n)
	}
	if a.NumLeafNodes() != 1 || b.NumLeafNodes() != 1 {
		t.Fatalf("leaves hold %d and %d links, want 1 each", a.NumLeafNodes(), b.NumLeafNodes())
	}
	if !strings.HasPrefix(a.URL(), "nats://127.0.0.1:") || a.URL() == hub.URL() || a.LeafURL() != "" {
		t.Fatalf("leaf URL %q, leaf URL for leaves %q (hub %q)", a.URL(), a.LeafURL(), hub.URL())
	}
	onA := []*bus.Conn{dial(t, a, bus.ConnOptions{}), dial(t, a, bus.ConnOptions{})}
	onB, onHub := dial(t, b, bus.ConnOptions{}), dial(t, hub, bus.ConnOptions{})
	got := map[*bus.Conn]<-chan bus.Message{}
	for _, c := range []*bus.Conn{onA[0], onA[1], onB, onHub} {
		got[c] = collect(t, c, 1024)
	}
	for _, from := range []*bus.Conn{onB, onHub} {
		for _, to := range onA {
			reaches(t, from, to, got[to])
		}
	}
	for _, to := range []*bus.Conn{onB, onHub} {
		reaches(t, onA[0], to, got[to])
	}
}

// reaches checks that what from publishes reaches to (whose messages
// come on got), once to's subscription is known where from publishes (it
// is sent until then).
func reaches(t *testing.T, from, to *bus.Conn, got <-chan bus.Message) {
	t.Helper()
	subject := "reach." + bus.NewToken()
	sub, err := to.Subscribe(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	waitCount(t, "a message on "+subject, 0, func() int {
		from.Publish(subject, []byte("hello"))
		select {
		case m := <-got:
			if string(m.Data) == "hello" && m.Subject == subject {
				return 0
			}
		case <-time.After(50 * time.Millisecond):
		}
		return 1
	})
}

// TestLeafUnreachableHub: a leaf whose hub does not answer fails within
// its ctx, naming the hub's address and why.
func TestLeafUnreachableHub(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = bus.StartLeaf(ctx, bus.Hub{URLs: []string{"nats-leaf://" + addr}, Token: "t"}, bus.ServerOptions{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach its hub at "+addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("StartLeaf = %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	t.Logf("%v", err)
}

// TestLeafWrongToken: a hub refuses a leaf without its token, and the
// leaf says so; the token appears in no error.
func TestLeafWrongToken(t *testing.T) {
	hub := startHub(t, bus.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := bus.StartLeaf(ctx, bus.Hub{URLs: []string{hub.LeafURL()}, Token: "not-the-token"}, bus.ServerOptions{})
	if err == nil || !strings.Contains(err.Error(), "Authorization Violation") || strings.Contains(err.Error(), "not-the-token") {
		t.Fatalf("StartLeaf = %v", err)
	}
	if n := hub.NumLeafNodes(); n != 0 {
		t.Errorf("hub holds %d leaf connections", n)
	}
}

func TestLeafBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		hub  bus.Hub
		o    bus.ServerOptions
		want string
	}{
		{bus.Hub{Token: "t"}, bus.ServerOptions{}, "no hub URL"},
		{bus.Hub{URLs: []string{"nats-leaf://127.0.0.1:1"}}, bus.ServerOptions{}, "no token"},
		{bus.Hub{URLs: []string{"127.0.0.1"}, Token: "t"}, bus.ServerOptions{}, "want scheme://host:port"},
		{bus.Hub{URLs: []string{"nats-leaf://127.0.0.1:1"}, Token: "t"}, bus.ServerOptions{Leaves: &bus.Listen{}}, "neither leaves nor routes"},
		{bus.Hub{URLs: []string{"nats-leaf://127.0.0.1:1"}, Token: "t", TLS: bus.ClientTLS{CA: []byte("not PEM")}}, bus.ServerOptions{}, "TLS CA"},
	} {
		if s, err := bus.StartLeaf(ctx, tt.hub, tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			if s != nil {
				s.Shutdown()
			}
			t.Errorf("StartLeaf(%+v, %+v) = %v, want %q", tt.hub, tt.o, err, tt.want)
		}
	}
}

// TestLeafLinkLostAndBack: a leaf whose hub goes away says so, dials it
// again, says so, and carries messages again.
func TestLeafLinkLostAndBack(t *testing.T) {
	o := bus.ServerOptions{Token: bus.NewToken(), Leaves: &bus.Listen{}}
	hub := startHub(t, o)
	links := make(chan string, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leaf, err := bus.StartLeaf(ctx, bus.Hub{URLs: []string{hub.LeafURL()}, Token: o.Token, OnLink: func(up bool, cause error) {
		links <- fmt.Sprint(up, cause != nil)
	}}, bus.ServerOptions{Token: o.Token})
	if err != nil {
		t.Fatal(err)
	}
	defer leaf.Shutdown()
	var port int
	fmt.Sscanf(hub.LeafURL()[strings.LastIndexByte(hub.LeafURL(), ':')+1:], "%d", &port)
	hub.Shutdown()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-links:
			if got != want {
				t.Fatalf("OnLink(%s), want (%s)", got, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("no OnLink(%s) within 15s", want)
		}
	}
	expect("false true")
	o.Leaves.Port = port
	hub2 := startHub(t, o)
	expect("true false")
	sub, pub := dial(t, hub2, bus.ConnOptions{}), dial(t, leaf, bus.ConnOptions{})
	reaches(t, pub, sub, collect(t, sub, 1024))
}

// TestCluster: three hub servers joined by routes act as one hub; leaves
// of different servers reach each other.
func TestCluster(t *testing.T) {
	hubs := startCluster(t, 3)
	a, b := startLeaf(t, hubs[0].Token(), hubs[1]), startLeaf(t, hubs[0].Token(), hubs[2])
	if hubs[1].NumLeafNodes() != 1 || hubs[2].NumLeafNodes() != 1 || hubs[0].NumLeafNodes() != 0 {
		t.Fatalf("leaf connections per hub server: %d %d %d", hubs[0].NumLeafNodes(), hubs[1].NumLeafNodes(), hubs[2].NumLeafNodes())
	}
	sub, pub := dial(t, a, bus.ConnOptions{}), dial(t, b, bus.ConnOptions{})
	reaches(t, pub, sub, collect(t, sub, 1024))
}

// startCluster starts n hub servers that share a token, the first the one
// the others join, and waits until every one is routed to every other.
func startCluster(t *testing.T, n int) []*bus.Server {
	t.Helper()
	token := bus.NewToken()
	first := startServer(t, bus.ServerOptions{Token: token, Leaves: &bus.Listen{}, Cluster: &bus.Cluster{}})
	if !strings.HasPrefix(first.RouteURL(), "nats-route://127.0.0.1:") {
		t.Fatalf("RouteURL = %q", first.RouteURL())
	}
	hubs := []*bus.Server{first}
	for i := 1; i < n; i++ {
		hubs = append(hubs, startServer(t, bus.ServerOptions{Token: token, Leaves: &bus.Listen{},
			Cluster: &bus.Cluster{Routes: []string{first.RouteURL()}}}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range hubs {
		if err := h.AwaitRoutes(ctx, n-1); err != nil {
			t.Fatal(err)
		}
	}
	return hubs
}

// TestClusterUnreachableRoute: a server that cannot join says where it
// tried and why, without the token.
func TestClusterUnreachableRoute(t *testing.T) {
	token := bus.NewToken()
	s := startServer(t, bus.ServerOptions{Token: token, Cluster: &bus.Cluster{Routes: []string{"nats-route://127.0.0.1:1"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := s.AwaitRoutes(ctx, 1)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), token) {
		t.Fatalf("AwaitRoutes = %v", err)
	}
	t.Logf("%v", err)
}

// The interest race. A proc subscribes (its inbox; a mesh's subject when
// an actor is spawned on it) and then tells its spawner, on another host,
// that it is ready; the spawner sends to it at once, and may tell a third
// process, on yet another host, which sends to it too. Neither message
// may find a server (the hub, a leaf, another server of the hub's
// cluster) still unaware of the subscription: NATS would drop it, as a
// message nobody wants.
//
// Through one hub this holds by NATS's order alone: a server handles one
// connection's protocol in order, so the proc's leaf handles its SUB
// before its PUB of the ready message, and sends the hub the subscription
// (LS+) before the message (LMSG) on the one link; the hub handles the
// LS+ first and sends it on to its other leaves before it forwards
// anything that follows along the same links. Every path between two
// leaves goes through the hub, so the subscription is ahead of every
// message that follows the ready one, however it travels.
//
// Across a cluster it does not: the hub's servers hear of the
// subscription over one route each, and the third process's message can
// come round by another server first (without HubServers, 110 of 5000
// rounds of spawner-then-third-party across three servers lost their
// message). ConnOptions.HubServers makes the proc's first publish after a
// subscription wait until every server of the hub has it.
//
// raceRounds runs rounds of exactly that and counts: procs on leaf home
// each subscribe fresh subjects and announce themselves; every spawner
// sends to each subject as soon as it hears and tells every teller, which
// sends to each subject in turn; each proc must get every message, every
// round. The test does catch the race where there is one: with each
// proc's subscriptions on one connection and its ready message sent from
// another of the same leaf (no order between the two), it fails within
// the first few rounds.
func raceRounds(t *testing.T, home *bus.Server, hubServers int, spawners, tellers []*bus.Server, procs, rounds, subjects int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A message "proc round" on race.ready or race.tell is answered with
	// one message on each of that proc's subjects of that round, which
	// names who sent it.
	answer := func(c *bus.Conn, name string, tell bool) func(bus.Message) {
		return func(m bus.Message) {
			var p, r int
			fmt.Sscanf(string(m.Data), "%d %d", &p, &r)
			for k := 0; k < subjects; k++ {
				c.Publish(fmt.Sprintf("race.p%d.r%d.s%d", p, r, k), []byte(name))
			}
			if tell {
				c.Publish("race.tell", m.Data)
			}
		}
	}
	serve := func(servers []*bus.Server, role, subject string, tell bool) {
		for i, s := range servers {
			name := fmt.Sprint(role, i)
			c := dial(t, s, bus.ConnOptions{Name: name})
			if _, err := c.Subscribe(subject); err != nil {
				t.Fatal(err)
			}
			c.Flush(ctx)
			go c.Run(ctx, answer(c, name, tell))
		}
	}
	serve(spawners, "spawner", "race.ready", true)
	serve(tellers, "teller", "race.tell", false)
	// Everybody's interest must be known where it is needed before the
	// first round: ask until every spawner and teller has answered.
	probe := dial(t, home, bus.ConnOptions{})
	if _, err := probe.Subscribe("race.p-1.r-1.s0"); err != nil {
		t.Fatal(err)
	}
	answers := collect(t, probe, 1024)
	heard := map[string]bool{}
	waitCount(t, "spawners and tellers heard from", len(spawners)+len(tellers), func() int {
		probe.Publish("race.ready", []byte("-1 -1"))
		select {
		case m := <-answers:
			heard[string(m.Data)] = true
		case <-time.After(50 * time.Millisecond):
		}
		return len(heard)
	})

	want := subjects * len(spawners) * (1 + len(tellers))
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := bus.Connect(home.URL(), bus.ConnOptions{Name: fmt.Sprint("proc ", p), Token: home.Token(), HubServers: hubServers})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			got := make(chan bus.Message, 4*want)
			go c.Run(ctx, func(m bus.Message) { got <- m })
			for r := 0; r < rounds; r++ {
				var subs []*bus.Subscription
				for k := 0; k < subjects; k++ {
					s, err := c.Subscribe(fmt.Sprintf("race.p%d.r%d.s%d", p, r, k))
					if err != nil {
						errs <- err
						return
					}
					subs = append(subs, s)
				}
				if err := c.Publish("race.ready", []byte(fmt.Sprintf("%d %d", p, r))); err != nil {
					errs <- err
					return
				}
				from := map[string]int{}
				for n := 0; n < want; n++ {
					select {
					case m := <-got:
						if !strings.Contains(m.Subject, fmt.Sprintf(".r%d.", r)) {
							errs <- fmt.Errorf("proc %d round %d: a message on %s", p, r, m.Subject)
							return
						}
						from[string(m.Data)]++
					case <-time.After(5 * time.Second):
						errs <- fmt.Errorf("proc %d round %d: %d of %d messages, by sender %v (the rest were dropped: no interest where they were sent)", p, r, n, want, from)
						return
					}
				}
				for _, s := range subs {
					s.Unsubscribe()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestInterestRace: procs on a leaf; spawners on another leaf and on the
// hub, which tell a third leaf and the hub.
func TestInterestRace(t *testing.T) {
	hub := startHub(t, bus.ServerOptions{})
	home, other, third := startLeaf(t, hub.Token(), hub), startLeaf(t, hub.Token(), hub), startLeaf(t, hub.Token(), hub)
	start := time.Now()
	raceRounds(t, home, 1, []*bus.Server{other, hub}, []*bus.Server{third, hub}, 8, 300, 2)
	t.Logf("8 procs x 300 rounds x 2 subjects x 2 spawners x (1 + 2 tellers): %v", time.Since(start).Round(time.Millisecond))
}

// TestInterestRaceCluster: the same with the hub a cluster of three
// servers: procs on a leaf of the second; spawners on a leaf of the third
// and on the first, which tell leaves of the first and the third and the
// third itself (so that what they send comes round by another server than
// the one the proc's subscription went through first).
func TestInterestRaceCluster(t *testing.T) {
	hubs := startCluster(t, 3)
	tok := hubs[0].Token()
	home := startLeaf(t, tok, hubs[1])
	spawners := []*bus.Server{startLeaf(t, tok, hubs[2]), hubs[0]}
	tellers := []*bus.Server{startLeaf(t, tok, hubs[0]), startLeaf(t, tok, hubs[2]), hubs[2]}
	start := time.Now()
	raceRounds(t, home, 3, spawners, tellers, 8, 300, 2)
	t.Logf("8 procs x 300 rounds x 2 subjects x 2 spawners x (1 + 3 tellers): %v", time.Since(start).Round(time.Millisecond))
}

// TestLeafKeepsItsPath: a leaf of a lone hub relinks only through the
// address it was given: cut there (a proxy closed), it does not reach the
// hub around it. Before, the hub advertised its own leaf address, which
// the leaf dialled first on relinking.
func TestLeafKeepsItsPath(t *testing.T) {
	hub := startHub(t, bus.ServerOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := strings.TrimPrefix(hub.LeafURL(), "nats-leaf://")
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leaf, err := bus.StartLeaf(ctx, bus.Hub{URLs: []string{"nats-leaf://" + ln.Addr().String()}, Token: hub.Token()}, bus.ServerOptions{Token: hub.Token()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leaf.Shutdown)
	waitCount(t, "hub's leaf links", 1, hub.NumLeafNodes)
	ln.Close() // the cut: the path closed, new links refused
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	waitCount(t, "hub's leaf links after the cut", 0, hub.NumLeafNodes)
	for range 10 { // five relink intervals and more
		time.Sleep(150 * time.Millisecond)
		if n := hub.NumLeafNodes(); n != 0 {
			t.Fatalf("the leaf reached the hub around the cut path (%d links)", n)
		}
	}
}
