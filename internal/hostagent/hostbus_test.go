package hostagent

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// testProcVar makes the test binary, started as a proc by an agent, serve
// as busProc.
const testProcVar = "HOSTAGENT_TEST_PROC"

// busProc is a proc for the host bus tests: it dials the bus its agent
// gives it, subscribes to its inbox, then says on test.up where it is
// ("<proc> <url> <hub servers>"), and echoes what comes to its inbox on test.echo. It
// runs until SIGTERM.
func busProc() int {
	env, c, err := dialAsProc()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	if _, err := c.Subscribe(jobenv.SubjectsOf(env.Job).Proc(env.Proc.ID)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c.Publish("test.up", []byte(fmt.Sprint(env.Proc.ID, " ", env.Bus.URL, " ", env.Bus.Hubs)))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c.Run(ctx, func(m bus.Message) { c.Publish("test.echo", m.Data) })
	return 0
}

// hostsOnLeaves runs n standalone agents in this process on a hub of
// hubs servers (the first the test's), asks each for two procs and checks
// where they are: each host's procs on one server of their own, none on
// the test's hub but those of the hosts that run hub servers. It returns
// the test's hub and the procs' buses by host.
func hostsOnLeaves(t *testing.T, n, hubs int) (*bus.Server, map[string]string) {
	const job = "jl"
	o := bus.ServerOptions{Leaves: &bus.Listen{}}
	if hubs > 1 {
		o.Cluster = &bus.Cluster{}
	}
	hub, err := bus.StartServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Shutdown)
	peer, err := bus.ConnectInProcess(hub, bus.ConnOptions{Name: "peer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	subj := jobenv.SubjectsOf(job)
	for _, s := range []string{"test.up", "test.echo", subj.Proc(jobenv.ClientID)} {
		if _, err := peer.Subscribe(s); err != nil {
			t.Fatal(err)
		}
	}
	peer.Flush(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	reported := map[int]bool{}
	up := map[string]string{} // proc -> its bus
	echoes := 0
	wake := make(chan struct{}, 1)
	go peer.Run(ctx, func(m bus.Message) {
		mu.Lock()
		defer mu.Unlock()
		switch m.Subject {
		case "test.up":
			var proc, url string
			var servers int
			fmt.Sscan(string(m.Data), &proc, &url, &servers)
			if servers == 0 {
				servers = 1 // one server: nothing to tell
			}
			if servers != hubs {
				t.Errorf("proc %s was told of %d hub servers, want %d", proc, servers, hubs)
			}
			up[proc] = url
			// At once: the proc's inbox must be known here already.
			peer.Publish(subj.Proc(proc), []byte(proc))
		case "test.echo":
			echoes++
		default:
			if f, err := wire.Parse(m.Data); err == nil && f.Port == wire.AgentsPort {
				reported[f.Rank] = true
			}
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			select {
			case <-wake:
			case <-time.After(20 * time.Millisecond):
			case <-deadline:
				t.Fatalf("after 20s, still waiting for %s", what)
			}
		}
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := jobenv.SealEnv(hub.Token(), []string{testProcVar + "=1"})
	if err != nil {
		t.Fatal(err)
	}
	env := jobenv.Env{Bus: jobenv.Bus{URL: hub.URL(), Token: hub.Token(), Leaf: hub.LeafURL()}, SealedEnv: sealed}
	if hubs > 1 {
		env.Bus.Hubs, env.Bus.Route = hubs, hub.RouteURL()
	}
	done := make(chan error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		args := jobenv.AgentArgs{Job: job, Index: i, Program: exe}
		e := env
		e.HostName = jobenv.AgentID(i)
		go func() { done <- Run(ctx, args, e, nil) }()
	}
	t.Cleanup(func() {
		cancel()
		for i := 0; i < n; i++ {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Errorf("an agent did not end within 15s of its ctx")
				return
			}
		}
	})
	waitFor("every agent's report", func() bool { return len(reported) == n })
	t.Logf("%d agents with their host buses up (a hub of %d): %v", n, hubs, time.Since(start).Round(time.Millisecond))
	for i := 0; i < n; i++ {
		req := wire.SpawnProcsReq{IDs: []string{fmt.Sprintf("c-%d", 2*i), fmt.Sprintf("c-%d", 2*i+1)}, Ranks: []int{2 * i, 2*i + 1},
			Env: [][]string{nil, nil}, Proc: jobenv.ClientID, Port: 11}
		h := wire.Header{Kind: wire.KindControl, Method: wire.OpSpawnProcs, ReplyTo: jobenv.ClientID, Port: 11, Rank: -1}
		w, err := wire.NewFrame(&h, bus.DefaultMaxMessage)
		if err != nil {
			t.Fatal(err)
		}
		w.Enc.Encode(&req)
		peer.Publish(subj.Proc(jobenv.AgentID(i)), w.Bytes())
		w.Free()
	}
	waitFor("every proc up", func() bool { return len(up) == 2*n })
	waitFor("an echo from every proc", func() bool { return echoes == 2*n })
	mu.Lock()
	defer mu.Unlock()
	byHost := map[string]string{}
	for proc, url := range up {
		var r int
		fmt.Sscanf(proc, "c-%d", &r)
		host := jobenv.AgentID(r / 2)
		switch {
		case url == hub.URL():
			t.Errorf("proc %s of %s dials the hub", proc, host)
		case byHost[host] == "":
			byHost[host] = url
		case byHost[host] != url:
			t.Errorf("the procs of %s dial %s and %s", host, byHost[host], url)
		}
	}
	seen := map[string]string{}
	for h, url := range byHost {
		if other, dup := seen[url]; dup {
			t.Errorf("%s and %s share the server %s", h, other, url)
		}
		seen[url] = h
	}
	// Nothing of the hosts is a client of the hub: the peer and the
	// hub's probe are all (a host's hub discovery hangs up once done).
	deadline := time.Now().Add(5 * time.Second)
	for hub.NumClients() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c := hub.NumClients(); c != 2 {
		t.Errorf("the hub holds %d client connections, want 2 (the test's peer and the hub's probe)", c)
	}
	return hub, byHost
}

// TestHostsOnLeaves: every host's agent runs a leaf of the hub and its
// procs dial it; the hub holds one leaf connection a host and no proc;
// messages sent to a proc the moment it says it is up reach it.
func TestHostsOnLeaves(t *testing.T) {
	hub, byHost := hostsOnLeaves(t, 3, 1)
	if got := hub.NumLeafNodes(); got != 3 {
		t.Errorf("the hub holds %d leaf connections, want 3", got)
	}
	if len(byHost) != 3 {
		t.Errorf("buses by host: %v", byHost)
	}
}

// TestHostsOnAHubOfTwo: with hubs = 2 host h0 runs the hub's second
// server, its procs on it; the leaves of h1 and h2 spread over the two
// servers (h1 on h0's, h2 on the test's).
func TestHostsOnAHubOfTwo(t *testing.T) {
	hub, byHost := hostsOnLeaves(t, 3, 2)
	if got := hub.NumLeafNodes(); got != 1 {
		t.Errorf("the first hub server holds %d leaf connections, want 1 (h2's)", got)
	}
	if got := hub.NumRoutes(); got != 1 {
		t.Errorf("the first hub server has %d routes, want 1 (to h0's)", got)
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	if strings.Join(hosts, " ") != "h0 h1 h2" {
		t.Errorf("buses by host: %v", byHost)
	}
}

// TestStandaloneUnreachableHub: an agent whose leaf cannot reach the hub
// fails at start, naming the hub's address and why.
func TestStandaloneUnreachableHub(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	args := jobenv.AgentArgs{Job: "ju", Index: 0, Program: "/bin/true"}
	env := jobenv.Env{Bus: jobenv.Bus{URL: "nats://127.0.0.1:1", Token: "t", Leaf: "nats-leaf://127.0.0.1:1"}}
	err := Run(ctx, args, env, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach its hub at 127.0.0.1:1") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Run = %v", err)
	}
}

// TestHostBusLost: a leaf whose hub goes away is given up after its
// grace, not before; a hub that comes back within it is no loss.
func TestHostBusLost(t *testing.T) {
	o := bus.ServerOptions{Token: bus.NewToken(), Leaves: &bus.Listen{}}
	hub, err := bus.StartServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hb, err := StartHostBus(ctx, HostBusConfig{Job: "jh", Bus: jobenv.Bus{Token: o.Token, Leaf: hub.LeafURL()}, LinkGrace: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	if p := hb.Procs(); p.Token != o.Token || !strings.HasPrefix(p.URL, "nats://127.0.0.1:") || p.Leaf != "" {
		t.Errorf("procs dial %+v", p)
	}
	port := hub.LeafURL()[strings.LastIndexByte(hub.LeafURL(), ':')+1:]
	// Away and back within the grace: no loss.
	hub.Shutdown()
	for deadline := time.Now().Add(5 * time.Second); hb.Server().NumLeafNodes() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leaf still links to a hub that is gone")
		}
	}
	fmt.Sscanf(port, "%d", &o.Leaves.Port)
	hub, err = bus.StartServer(o)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-hb.Lost():
		t.Fatalf("given up after a short loss: %v", err)
	case <-time.After(2500 * time.Millisecond):
	}
	// Away for good.
	start := time.Now()
	hub.Shutdown()
	select {
	case err := <-hb.Lost():
		if took := time.Since(start); took < 1400*time.Millisecond || !strings.Contains(err.Error(), "has been down for 1.5s") {
			t.Errorf("given up after %v: %v", took, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not given up 10s after the hub went away")
	}
}

// dialAsProc is how a test proc starts: it reads the job's variables its
// agent gave it and dials the bus they name.
func dialAsProc() (jobenv.Env, *bus.Conn, error) {
	env, err := jobenv.FromEnviron()
	if err != nil {
		return env, nil, err
	}
	c, err := bus.Connect(env.Bus.URL, bus.ConnOptions{Name: "proc " + env.Proc.ID, Token: env.Bus.Token, HubServers: env.Bus.Hubs})
	return env, c, err
}
