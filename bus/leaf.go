package bus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Leaf nodes. A leaf is an embedded server of its own that links to a hub
// (a server started with Leaves, or any server of a cluster of them) and
// carries, over that one link, what its own clients publish to the rest of
// the bus and what the rest of the bus publishes to them: a message for N
// subscribers on one leaf crosses the link once. NATS does the routing:
// the leaf tells the hub of every subject its clients subscribe to, and
// the hub sends it only what they want.

// Hub says what a leaf node links to.
type Hub struct {
	// URLs are the leaf URLs (Server.LeafURL) of the hub's servers: one,
	// or every server of a cluster. The leaf tries them in this order, at
	// start and whenever its link is lost; it also learns of servers that
	// join the hub's cluster later.
	URLs []string
	// Token is the hub's secret.
	Token string
	// TLS, when on, secures the link: what the leaf trusts of the hub's
	// certificate, and the certificate it shows when the hub asks.
	TLS ClientTLS
	// OnLink, if set, hears of every change of the leaf's link to the hub
	// after StartLeaf returned: lost (up false, with the cause) and back
	// (up true, cause nil). It is called from one goroutine, in order, and
	// must not block.
	OnLink func(up bool, cause error)
	// Local names subjects that the leaf delivers to its own clients
	// without telling the hub of each subscriber: see Funnel.
	Local []Funnel
}

// Funnel routes a whole subtree of subjects to one leaf. A message on
// Public+".anything" (from the leaf's clients, or from the rest of the
// bus) is delivered on the leaf as Local+".anything", to its clients
// that subscribed there. The leaf tells the hub once, when its link comes
// up, that it wants Public+".>"; a subscription under Local+"." is never
// announced. So N subscribers that each want their own subject under
// Public cost the hub, and every other leaf, one subscription, however
// many come and go; a message to a subject under Public crosses the link
// to this leaf whether or not anyone there wants it.
//
// A subscriber under Local sees the message's subject as delivered
// (Local+".anything"): the caller maps it back. Order is NATS's as
// ever, and the hub knows of the subtree before StartLeaf returns: a
// subscriber that subscribes and then tells another so is reached by
// that other process through the hub (see "Interest travels with the
// messages" in the package doc) with no wait at all.
type Funnel struct{ Public, Local string }

// probeSubject is answered by every hub server (every server started
// with Leaves or Cluster): a leaf knows its link carries messages both
// ways once a request over it has been answered, and a Conn that every
// server of the hub knows its subscriptions once each has answered one
// sent after them (hubsync.go).
const probeSubject = "_MONARCH_BUS.hub"

// linkPoll is how often a leaf looks at its link to the hub; probeAgain
// how soon it probes the link again at start when the hub's interest has
// not come over it yet.
const (
	linkPoll   = 50 * time.Millisecond
	probeAgain = 5 * time.Millisecond
)

// StartLeaf starts an embedded server as a leaf node of hub: its clients
// (o.Host, default loopback; o.Port; the token o.Token, default a fresh
// one) reach every subscriber of the hub and of its other leaves, and
// are reached by them. It returns once a message has crossed the link to
// the hub and back, or fails when ctx ends first (give it a deadline),
// naming the hub's addresses and the last problem the leaf met (an
// address it cannot reach, the token refused). After that the leaf keeps
// its link up itself: a lost link is dialled again (see Hub.OnLink), and
// messages between the leaf and the hub while it is down are lost.
//
// A leaf accepts neither leaves nor routes of its own (o.Leaves and
// o.Cluster must be nil).
func StartLeaf(ctx context.Context, hub Hub, o ServerOptions) (*Server, error) {
	if len(hub.URLs) == 0 {
		return nil, errors.New("bus: leaf: no hub URL")
	}
	if hub.Token == "" {
		return nil, fmt.Errorf("bus: leaf of %s: no token", hubAddrs(hub.URLs))
	}
	if o.Leaves != nil || o.Cluster != nil {
		return nil, errors.New("bus: a leaf takes neither leaves nor routes")
	}
	opts, err := serverOptions(&o)
	if err != nil {
		return nil, err
	}
	urls, err := serverURLs(hub.URLs, "hub", hub.Token)
	if err != nil {
		return nil, err
	}
	remote := &server.RemoteLeafOpts{URLs: urls, NoRandomize: true, Compression: noCompression}
	if hub.TLS.On() {
		cfg, err := hub.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("bus: leaf of %s: %w", hubAddrs(hub.URLs), err)
		}
		remote.TLS, remote.TLSConfig, remote.TLSTimeout = true, cfg, 5
	}
	if err := funnel(opts, remote, hub.Local); err != nil {
		return nil, err
	}
	opts.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	// A pong from the hub waits behind what the hub sends first: under a
	// flood, megabytes the leaf's starved procs read slowly. A link
	// judged by pings alone is then stale while it carries data, is cut,
	// and loses what was on it; so it gets LeafMaxPingsOut pings (about
	// 20 s), and a hub server that is really gone is noticed by the
	// link's silence first (leafsilence.go).
	opts.PingInterval, opts.MaxPingsOut = DefaultPingInterval, LeafMaxPingsOut
	// A lost link is dialled again after leafRelink (NATS waits 1 s),
	// the next of the hub's servers first: a leaf whose server died moves
	// to a live one at once.
	opts.LeafNode.ReconnectInterval = leafRelink
	s, err := start(opts, &o)
	if err != nil {
		return nil, err
	}
	if err := s.awaitHub(ctx); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("bus: leaf cannot reach its hub at %s: %w", hubAddrs(hub.URLs), err)
	}
	var silence *linkSilence
	if len(hub.URLs) > 1 {
		// With one server to dial there is nowhere to move to: a link
		// left alone heals when the silence ends.
		if silence, err = s.startSilenceWatch(); err != nil {
			s.Shutdown()
			return nil, fmt.Errorf("bus: leaf: %w", err)
		}
	}
	s.watchEnd, s.watchDone = make(chan struct{}), make(chan struct{})
	go s.watchLink(hub.OnLink, silence)
	return s, nil
}

// funnel sets a leaf's account mappings (Public.> to Local.>: NATS maps
// what its clients publish and what comes over its link, and announces a
// mapping's source to the hub when the link comes up) and keeps the
// subscriptions under Local from the hub (a denied import is never sent
// over the link as interest), and the messages too (a denied export: what
// is delivered under Local stays on the leaf).
func funnel(opts *server.Options, remote *server.RemoteLeafOpts, fs []Funnel) error {
	if len(fs) == 0 {
		return nil
	}
	acc := server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT)
	for _, f := range fs {
		if !validPrefix(f.Public) || !validPrefix(f.Local) || f.Public == f.Local {
			return fmt.Errorf("bus: leaf: funnel %q to %q: want two distinct subjects without wildcards", f.Public, f.Local)
		}
		if err := acc.AddMapping(f.Public+".>", f.Local+".>"); err != nil {
			return fmt.Errorf("bus: leaf: funnel %q to %q: %w", f.Public, f.Local, err)
		}
		remote.DenyImports = append(remote.DenyImports, f.Local+".>")
		remote.DenyExports = append(remote.DenyExports, f.Local+".>")
	}
	opts.Accounts = append(opts.Accounts, acc)
	return nil
}

// validPrefix: a subject of non-empty tokens, no wildcards.
func validPrefix(s string) bool {
	if s == "" || strings.ContainsAny(s, "*> \t\r\n") {
		return false
	}
	for _, t := range strings.Split(s, ".") {
		if t == "" {
			return false
		}
	}
	return true
}

// leafRelink is how long a leaf waits before it dials its hub again
// after its link was lost, and between tries (with as much again of
// jitter after a failed one).
const leafRelink = 200 * time.Millisecond

// LeafMaxPingsOut is how many pings a leaf's link to its hub may have
// unanswered before it is stale (each DefaultPingInterval).
const LeafMaxPingsOut = 10

// awaitHub waits until a probe crosses the leaf's link to its hub and
// back.
func (s *Server) awaitHub(ctx context.Context) error {
	nc, err := nats.Connect("", nats.InProcessServer(s.ns), nats.Token(s.token), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	for {
		try, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		_, err := nc.RequestWithContext(try, probeSubject, nil)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			if cause := s.log.last(); cause != nil {
				return cause
			}
			return fmt.Errorf("no answer over the link: %w", ctx.Err())
		}
		if errors.Is(err, nats.ErrNoResponders) {
			// The hub's interest has not come over the link yet.
			select {
			case <-time.After(probeAgain):
			case <-ctx.Done():
			}
		}
	}
}

// startProbe makes a hub server answer probes.
func (s *Server) startProbe() error {
	nc, err := nats.Connect("", nats.InProcessServer(s.ns), nats.Token(s.token), nats.NoReconnect(), nats.Name("hub probe"))
	if err != nil {
		return fmt.Errorf("bus: hub probe: %w", err)
	}
	// The answer names the server, echoes the probe and names the
	// servers this one holds routes to: "<server> <probe> <peer>,...".
	id := s.ns.ID() + " "
	if _, err := nc.Subscribe(probeSubject, func(m *nats.Msg) {
		answer := append([]byte(id), m.Data...)
		m.Respond(s.appendPeers(answer))
	}); err != nil {
		nc.Close()
		return fmt.Errorf("bus: hub probe: %w", err)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return fmt.Errorf("bus: hub probe: %w", err)
	}
	s.probe = nc
	return nil
}

// appendPeers appends " <id>,<id>...", the servers a hub server holds
// routes to, if any.
func (s *Server) appendPeers(b []byte) []byte {
	if s.routeURL == "" {
		return b
	}
	rz, err := s.ns.Routez(nil)
	if err != nil {
		return b
	}
	sep := byte(' ')
	var seen []string
	for _, r := range rz.Routes {
		if r.RemoteID == "" || contains(seen, r.RemoteID) {
			continue
		}
		seen = append(seen, r.RemoteID)
		b = append(append(b, sep), r.RemoteID...)
		sep = ','
	}
	return b
}

// watchLink reports each change of a leaf's link to onLink, and cuts a
// silent one (leafsilence.go), until Shutdown.
func (s *Server) watchLink(onLink func(up bool, cause error), silence *linkSilence) {
	defer close(s.watchDone)
	if silence != nil {
		defer silence.nc.Close()
	}
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	up := true
	for {
		select {
		case <-t.C:
		case <-s.watchEnd:
			return
		}
		if silence != nil {
			s.silenceTick(silence, time.Now())
		}
		now := s.ns.NumLeafNodes() > 0
		if now == up {
			continue
		}
		up = now
		if onLink == nil {
			continue
		}
		if up {
			onLink(true, nil)
			continue
		}
		cause := s.log.last()
		if cause == nil {
			cause = errors.New("link closed")
		}
		onLink(false, cause)
	}
}

// hubAddrs names the hub's servers by address, without credentials.
func hubAddrs(urls []string) string {
	hosts := make([]string, len(urls))
	for i, s := range urls {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			hosts[i] = u.Host
		} else {
			hosts[i] = "?"
		}
	}
	return strings.Join(hosts, ", ")
}
