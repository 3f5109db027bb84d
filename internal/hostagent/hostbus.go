package hostagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/rs/zerolog"
)

// A host's bus. Every host of a job runs a NATS server of its own that its
// procs (and its agent) dial over loopback: a leaf node of the job's hub
// (the server the launcher, or the client run directly, runs). A message
// from a proc of one host to procs of another crosses the link between
// the two hosts' leaves and the hub once, whatever the number of its
// receivers there; NATS fans it out on the host.
//
// With [bus] hubs = K in the hosts file the hub is K servers joined by
// routes: the launcher's, and one on each of the hosts 0..K-2, which then
// serve their own procs directly (they need no leaf). Those hosts announce
// their servers on the job's bus (jobenv.Subjects.Hubs); every other host
// asks for them before it starts its leaf and links to server (index mod
// K) first, so the leaves spread evenly over the hub's servers.
//
// A leaf delivers its own procs' subjects itself: a proc of the host has
// an id under the host's key (h3.c-5, see jobenv.HostKey), its subject
// is under the host's prefix (mon.<job>.proc.h3.>), and the leaf
// subscribes that prefix at the hub once, when its link comes up, and
// delivers what comes under it to its procs, which subscribe under
// mon.<job>.local.h3 (jobenv.Subjects.Inbox), never announced to the hub
// (bus.Funnel). So the interest that crosses the hub at spawn grows with
// the hosts, not with their procs.

const (
	// HubWait bounds how long a host's bus waits for its link to the hub
	// at start.
	HubWait = 10 * time.Second
	// HubsWait bounds how long a host waits for the hub's servers to
	// announce themselves.
	HubsWait = 30 * time.Second
	// LinkGrace is how long a host's leaf may stay cut off from the hub
	// (NATS dials it again meanwhile) before the host gives up on the job.
	LinkGrace = 10 * time.Second
)

// HostBusConfig says what host's bus to start.
type HostBusConfig struct {
	Job string
	// Index is the host's index in the job: with several hub servers, it
	// says whether the host runs one and which the leaf links to first.
	Index int
	// Bus is the job's: Leaf, Token, TLS; with Hubs > 1, also Route and
	// URL (the launcher's server, where the hub's servers are announced).
	Bus jobenv.Bus
	Log zerolog.Logger
	// LinkGrace is how long a leaf may be cut off from the hub before
	// Lost fires. Default LinkGrace.
	LinkGrace time.Duration
	// Key is the host's key, its agent's id: a leaf delivers the
	// subjects of the procs under it on the host (Procs().Local). Empty,
	// or not a key (jobenv.ValidHostKey): none.
	Key string
	// Cert is the host's certificate from the job's CA, when the bus
	// runs TLS with one: its leaf shows it to the hub, a hub server of
	// the host to clients, leaves and the other servers.
	Cert *tls.Certificate
}

// ClientTLS is what a process of the job trusts of its hub's
// certificate: b's CA and name; off when the job's bus runs no TLS.
func ClientTLS(b jobenv.Bus) bus.ClientTLS {
	return bus.ClientTLS{CA: []byte(b.TLSCA), Name: b.TLSName}
}

// HostBus is a host's server. Its methods are safe for concurrent use.
type HostBus struct {
	srv   *bus.Server
	token string
	nhubs int           // the hub's servers
	key   string        // the host's key, if its leaf delivers its procs' subjects
	hubs  string        // the hub's first address, for messages
	tls   bus.ClientTLS // how procs dial the server over TLS, if they do
	// secure: the host's links to the hub run TLS (Procs().Secure)
	secure bool

	announcer *bus.Conn // a hub host's: announces its server
	stopRun   context.CancelFunc

	lost      chan error // gets one error when the link is given up
	grace     time.Duration
	mu        sync.Mutex
	downTimer *time.Timer
	closed    bool
}

// StartHostBus starts the server of a host: a leaf of the job's hub, or
// one of the hub's servers. It returns once that server is linked to the
// hub (bounded by ctx, HubWait and HubsWait) or fails, naming the hub's
// address and why.
func StartHostBus(ctx context.Context, cfg HostBusConfig) (*HostBus, error) {
	b := cfg.Bus
	if b.Leaf == "" || b.Token == "" {
		return nil, errors.New("host bus: no hub to link to (leaf URL and token)")
	}
	h := &HostBus{token: b.Token, nhubs: b.Hubs, lost: make(chan error, 1), hubs: hostOf(b.Leaf), grace: cfg.LinkGrace,
		secure: ClientTLS(b).On() || b.Secure}
	if h.grace <= 0 {
		h.grace = LinkGrace
	}
	if b.Hubs > 1 {
		if ClientTLS(b).On() && cfg.Cert == nil {
			return nil, errors.New("host bus: a hub of several servers with TLS needs the host's certificate from the job's CA")
		}
		if cfg.Index < b.Hubs-1 {
			if b.Route == "" {
				return nil, errors.New("host bus: no route URL to join the hub's first server")
			}
			if err := h.startHub(ctx, cfg); err != nil {
				return nil, err
			}
			return h, nil
		}
	}
	urls := []string{b.Leaf}
	if b.Hubs > 1 {
		var err error
		if urls, err = hubServers(ctx, cfg); err != nil {
			return nil, err
		}
	}
	hub := bus.Hub{URLs: urls, Token: b.Token, TLS: ClientTLS(b),
		OnLink: func(up bool, cause error) { h.link(cfg.Log, up, cause) }}
	if jobenv.ValidHostKey(cfg.Key) {
		subj := jobenv.SubjectsOf(cfg.Job)
		hub.Local = []bus.Funnel{{Public: subj.ProcsOf(cfg.Key), Local: subj.LocalOf(cfg.Key)}}
	}
	linkCtx, cancel := context.WithTimeout(ctx, HubWait)
	defer cancel()
	hub.TLS.Cert = cfg.Cert
	o := bus.ServerOptions{Token: b.Token}
	if cfg.Cert != nil && hub.TLS.On() {
		// The host's procs dial it over TLS too, though on loopback: the
		// host's certificate names the hub, as their CA and name expect.
		o.TLS, h.tls = &bus.ServerTLS{Cert: *cfg.Cert}, hub.TLS
		h.tls.Cert = nil
	}
	srv, err := bus.StartLeaf(linkCtx, hub, o)
	if err != nil {
		return nil, err
	}
	h.srv = srv
	if hub.Local != nil {
		h.key = cfg.Key
	}
	return h, nil
}

// startHub starts server Index+1 of the hub, joined to the first, and
// announces it.
func (h *HostBus) startHub(ctx context.Context, cfg HostBusConfig) error {
	host, adv, err := hubListen(cfg.Bus.Leaf)
	if err != nil {
		return err
	}
	l := bus.Listen{Host: host, Advertise: adv}
	o := bus.ServerOptions{Token: h.token, Leaves: &l, Cluster: &bus.Cluster{Listen: l, Routes: []string{cfg.Bus.Route}}}
	if h.tls = ClientTLS(cfg.Bus); h.tls.On() {
		o.TLS = &bus.ServerTLS{Cert: *cfg.Cert, PeerCA: h.tls.CA, PeerName: h.tls.Name}
	}
	srv, err := bus.StartServer(o)
	if err != nil {
		return fmt.Errorf("host bus: hub server: %w", err)
	}
	h.srv = srv
	joinCtx, cancel := context.WithTimeout(ctx, HubWait)
	defer cancel()
	// Linked to every other server, it is one of the hub: then it can
	// answer the probes of the processes that wait for all.
	if err := srv.AwaitRoutes(joinCtx, cfg.Bus.Hubs-1); err != nil {
		srv.Shutdown()
		return fmt.Errorf("host bus: join the hub: %w", err)
	}
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "hub announcer"})
	if err != nil {
		srv.Shutdown()
		return fmt.Errorf("host bus: %w", err)
	}
	subj := jobenv.SubjectsOf(cfg.Job)
	note := []byte(strconv.Itoa(cfg.Index+1) + " " + srv.LeafURL())
	if _, err := conn.Subscribe(subj.HubsAsk()); err != nil {
		conn.Close()
		srv.Shutdown()
		return fmt.Errorf("host bus: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	go conn.Run(runCtx, func(bus.Message) { conn.Publish(subj.Hubs(), note) })
	conn.Publish(subj.Hubs(), note)
	h.announcer, h.stopRun = conn, stop
	return nil
}

// hubListen is where a hub host's server listens for leaves and routes,
// and the address it gives them: loopback for a hub on loopback (local
// hosts), else every interface, advertising this host's address on the
// route to the first hub server.
func hubListen(firstLeaf string) (host, adv string, err error) {
	first := hostOf(firstLeaf)
	h, _, err := net.SplitHostPort(first)
	if err != nil {
		return "", "", fmt.Errorf("host bus: hub leaf URL %q: %w", firstLeaf, err)
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() || h == "localhost" {
		return "127.0.0.1", "127.0.0.1", nil
	}
	adv, err = bus.LocalAddrTo(h)
	if err != nil {
		return "", "", fmt.Errorf("host bus: this host's address on the route to the hub at %s: %w", first, err)
	}
	return "0.0.0.0", adv, nil
}

// hubServers asks the hub's servers to announce themselves (on the
// launcher's server) and returns their leaf URLs in the order this host's
// leaf tries them: server (Index mod Hubs) first.
func hubServers(ctx context.Context, cfg HostBusConfig) ([]string, error) {
	b := cfg.Bus
	ctx, cancel := context.WithTimeout(ctx, HubsWait)
	defer cancel()
	conn, err := bus.Connect(b.URL, bus.ConnOptions{Name: "hub discovery " + jobenv.AgentID(cfg.Index), Token: b.Token, TLS: ClientTLS(b)})
	if err != nil {
		return nil, fmt.Errorf("host bus: ask for the hub's servers: %w", err)
	}
	defer conn.Close()
	subj := jobenv.SubjectsOf(cfg.Job)
	if _, err := conn.Subscribe(subj.Hubs()); err != nil {
		return nil, err
	}
	if err := conn.Flush(ctx); err != nil {
		return nil, err
	}
	urls := make([]string, b.Hubs)
	urls[0] = b.Leaf
	var mu sync.Mutex
	found := 1
	heard := make(chan struct{}, 1)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go conn.Run(runCtx, func(m bus.Message) {
		i, u, ok := strings.Cut(string(m.Data), " ")
		n, err := strconv.Atoi(i)
		if !ok || err != nil || n < 1 || n >= len(urls) {
			return
		}
		mu.Lock()
		if urls[n] == "" {
			urls[n] = u
			found++
		}
		mu.Unlock()
		select {
		case heard <- struct{}{}:
		default:
		}
	})
	ask := time.NewTicker(250 * time.Millisecond)
	defer ask.Stop()
	for {
		mu.Lock()
		n := found
		mu.Unlock()
		if n == b.Hubs {
			break
		}
		if err := conn.Publish(subj.HubsAsk(), nil); err != nil {
			return nil, fmt.Errorf("host bus: ask for the hub's servers: %w", err)
		}
		select {
		case <-heard:
		case <-ask.C:
		case <-ctx.Done():
			var missing []string
			mu.Lock()
			for i, u := range urls {
				if u == "" {
					missing = append(missing, hubHost(b, i-1))
				}
			}
			mu.Unlock()
			return nil, fmt.Errorf("host bus: %d of %d hub servers known after %v: none heard from the servers on %s", n, b.Hubs, HubsWait, strings.Join(missing, ", "))
		}
	}
	first := cfg.Index % b.Hubs
	return append(append([]string(nil), urls[first:]...), urls[:first]...), nil
}

// hubHost names the host of the agent that runs the hub's server i+1
// (host i): by its name when the launcher gave the names, else as host
// i's agent.
func hubHost(b jobenv.Bus, i int) string {
	if i >= 0 && i < len(b.HubHosts) {
		return b.HubHosts[i]
	}
	return "the host of agent " + jobenv.AgentID(i)
}

// link hears of the leaf's link to the hub going down or up: down for
// LinkGrace, the host gives up (Lost).
func (h *HostBus) link(log zerolog.Logger, up bool, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if up {
		log.Info().Msg("the link to the job's hub is back")
		if h.downTimer != nil {
			h.downTimer.Stop()
			h.downTimer = nil
		}
		return
	}
	// At a job's end the hosts go at once, and a leaf may see its hub
	// server (another host's) go first: that is worth a warning only if
	// the link stays down.
	log.Info().Err(cause).Str("hub", h.hubs).Msg("lost the link to the job's hub; dialling it again")
	if h.downTimer == nil {
		down := time.Now()
		h.downTimer = time.AfterFunc(min(linkWarn, h.grace), func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.closed || h.downTimer == nil {
				return
			}
			log.Warn().Err(cause).Str("hub", h.hubs).Msgf("the link to the job's hub has been down for %v; messages to and from this host are lost meanwhile", time.Since(down).Round(time.Millisecond))
			h.downTimer = time.AfterFunc(h.grace-time.Since(down), func() {
				select {
				case h.lost <- fmt.Errorf("the link to the job's hub at %s has been down for %v: %v", h.hubs, h.grace, cause):
				default:
				}
			})
		})
	}
}

// linkWarn is how long a host's link to the hub must be down before the
// host warns of it.
const linkWarn = time.Second

// Server is the host's server: the host's agent and procs connect to it.
func (h *HostBus) Server() *bus.Server { return h.srv }

// Procs is how the host's procs dial its server: over loopback, with
// the job's token (and the number of the hub's servers, and the host's
// key when the leaf delivers its procs' subjects); over TLS when the
// host has a certificate of the job's CA (a hub server's one client port
// is TLS when its links are; a leaf's is so that every link of the job
// is); else in the clear, which loopback keeps off the network (Secure
// then says the job's links between hosts run TLS).
func (h *HostBus) Procs() jobenv.Bus {
	return jobenv.Bus{URL: h.srv.URL(), Token: h.token, Hubs: h.nhubs, Local: h.key, TLSCA: string(h.tls.CA), TLSName: h.tls.Name,
		Secure: h.secure}
}

// Lost gets an error once the host's link to the hub has been down for
// the link grace: the job is gone, or this host is cut off from it.
func (h *HostBus) Lost() <-chan error { return h.lost }

// Close stops the host's server, closing every connection to it.
// Idempotent.
func (h *HostBus) Close() {
	h.mu.Lock()
	h.closed = true
	if h.downTimer != nil {
		h.downTimer.Stop()
	}
	h.mu.Unlock()
	if h.announcer != nil {
		h.stopRun()
		h.announcer.Close()
	}
	h.srv.Shutdown()
}

// hostOf is the host:port of a URL, without credentials.
func hostOf(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host
	}
	return s
}
