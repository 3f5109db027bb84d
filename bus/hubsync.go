package bus

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Subscriptions known to every server of a hub. Through one hub server a
// subscription travels ahead of every message its connection sends after
// it (see the package doc). Across a cluster it does not: the servers
// hear of it over one route each, and a message that goes round by
// another server can overtake it. So with ConnOptions.HubServers > 1 the
// first Publish after a Subscribe (or after the link came back, when
// every subscription was made again) first sends a probe that every
// server of the hub answers, and waits for the answers: each server
// handled the probe after the subscription (one route, in order), so each
// knows it, and has told its leaves, before anything is published after
// it.
//
// Which servers are the hub is what the servers say: each answer names
// the server and the servers it holds routes to, and the probe is done
// when every server named by an answer has answered. A server that dies
// drops out of its peers' routes, and so out of the probe: at once when
// its process ends (the peers' route connections are reset), within
// RouteStale when its host goes silent. A server named but silent for
// HubSyncBound is given up on: the Publish goes on without its answer, and
// later probes do not wait for it until it answers one again. So a Publish
// waits at most HubSyncBound for the hub, and only after a Subscribe or a
// reconnect.

// HubSyncBound bounds how long a Publish waits for the hub's servers to
// answer its probe. It is below the host timeout (5 s) less a heartbeat
// interval, so that a host agent's heartbeat held behind a probe still
// comes in time.
const HubSyncBound = 3 * time.Second

// probeEvery is how often a probe is sent again while answers are
// missing (a server that has only just joined may not yet have heard of
// the others' probes, and one whose route is down hears none).
const probeEvery = 250 * time.Millisecond

// hubSync is a Conn's record of the subscriptions the hub's servers may
// not all know yet.
type hubSync struct {
	subs    atomic.Uint64 // subscriptions made
	mu      sync.Mutex    // one probe at a time
	known   atomic.Uint64 // of subs, those every server knows
	seq     uint64        // the last probe's number (under mu)
	late    map[string]bool
	replies *nats.Subscription
	inbox   string
}

// newHubSync prepares probes of servers hub servers on nc; nil for one.
func newHubSync(nc *nats.Conn, servers int) (*hubSync, error) {
	if servers <= 1 {
		return nil, nil
	}
	h := &hubSync{inbox: nc.NewRespInbox(), late: map[string]bool{}}
	var err error
	if h.replies, err = nc.SubscribeSync(h.inbox); err != nil {
		return nil, err
	}
	h.replies.SetPendingLimits(-1, -1)
	return h, nil
}

// subscribed notes a new subscription.
func (h *hubSync) subscribed() {
	if h != nil {
		h.subs.Add(1)
	}
}

// probeAnswer is one server's answer to a probe: "<server> <probe>
// <peer>,<peer>...", the peers being the servers it holds routes to.
type probeAnswer struct {
	server string
	probe  uint64
	peers  []string
}

func parseProbeAnswer(b []byte) (probeAnswer, bool) {
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return probeAnswer{}, false
	}
	n, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return probeAnswer{}, false
	}
	a := probeAnswer{server: fields[0], probe: n}
	if len(fields) > 2 {
		a.peers = strings.Split(fields[2], ",")
	}
	return a, true
}

// probeRound is what one awaitHub call has heard.
type probeRound struct {
	answered map[string]bool     // servers that answered a probe of this call
	views    map[string][]string // each answering server's latest peers
}

// waiting is the servers the round still waits for: named by an answer,
// not answered, not given up on. None, once at least one answered, means
// every server of the hub knows the subscriptions.
func (r *probeRound) waiting(late map[string]bool) []string {
	var out []string
	for _, peers := range r.views {
		for _, p := range peers {
			if !r.answered[p] && !late[p] && !contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// awaitHub returns once every server of the hub knows every subscription
// made before the call (each has answered a probe sent after them), or
// after HubSyncBound, giving up on the servers that did not answer.
func (c *Conn) awaitHub() error {
	h := c.hub
	if h == nil {
		return nil
	}
	// A link come back made every subscription again, perhaps on
	// another server: as many new ones.
	want := h.subs.Load() + c.relinks.Load()
	if h.known.Load() >= want {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known.Load() >= want {
		return nil // another publish probed meanwhile
	}
	want = h.subs.Load() + c.relinks.Load() // these probes cover all made so far
	first := h.seq + 1
	r := probeRound{answered: map[string]bool{}, views: map[string][]string{}}
	deadline := time.Now().Add(HubSyncBound)
	for len(r.answered) == 0 || len(r.waiting(h.late)) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			// The servers still named but silent: dead, with routes
			// that have not noticed yet, or far behind. The message
			// goes on; the next probes do not wait for them.
			for _, s := range r.waiting(h.late) {
				h.late[s] = true
			}
			break
		}
		h.seq++
		if err := c.nc.PublishRequest(probeSubject, h.inbox, []byte(strconv.FormatUint(h.seq, 10))); err != nil {
			return mapErr(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(probeEvery, left))
		for len(r.answered) == 0 || len(r.waiting(h.late)) > 0 {
			m, err := h.replies.NextMsgWithContext(ctx)
			if err != nil {
				break // ask again
			}
			// A probe sent before this call proves nothing of the
			// subscriptions made since.
			a, ok := parseProbeAnswer(m.Data)
			if !ok || a.probe < first {
				continue
			}
			r.answered[a.server] = true
			r.views[a.server] = append(a.peers, a.server)
			delete(h.late, a.server)
		}
		cancel()
	}
	h.known.Store(want)
	return nil
}
