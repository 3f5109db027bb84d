package bus

import (
	"context"
	"fmt"
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
// first Publish after a Subscribe first sends a probe that every server
// of the hub answers, and waits for every answer: each server handled the
// probe after the subscription (one route, in order), so each knows it,
// and has told its leaves, before anything is published after it.

// hubSyncTimeout bounds how long a Publish waits for the hub's servers to
// answer; probeEvery is how often it asks again meanwhile (a server that
// has only just joined may not have heard of the others' probes yet).
const (
	hubSyncTimeout = 10 * time.Second
	probeEvery     = 250 * time.Millisecond
)

// hubSync is a Conn's record of the subscriptions the hub's servers may
// not all know yet.
type hubSync struct {
	servers int
	subs    atomic.Uint64 // subscriptions made
	mu      sync.Mutex    // one probe at a time
	known   atomic.Uint64 // subscriptions every server knows
	seq     uint64        // the last probe's number (under mu)
	replies *nats.Subscription
	inbox   string
}

// newHubSync prepares probes of servers hub servers on nc; nil for one.
func newHubSync(nc *nats.Conn, servers int) (*hubSync, error) {
	if servers <= 1 {
		return nil, nil
	}
	h := &hubSync{servers: servers, inbox: nc.NewRespInbox()}
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

// awaitHub returns once every server of the hub knows every subscription
// made before the call: each has answered a probe sent after them.
func (c *Conn) awaitHub() error {
	h := c.hub
	if h == nil {
		return nil
	}
	want := h.subs.Load()
	if h.known.Load() >= want {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known.Load() >= want {
		return nil // another publish probed meanwhile
	}
	want = h.subs.Load() // these probes cover all made so far
	first := h.seq + 1
	answered := map[string]bool{}
	deadline := time.Now().Add(hubSyncTimeout)
	for len(answered) < h.servers {
		if time.Now().After(deadline) {
			return fmt.Errorf("bus: %d of %d hub servers answered within %v", len(answered), h.servers, hubSyncTimeout)
		}
		h.seq++
		if err := c.nc.PublishRequest(probeSubject, h.inbox, []byte(strconv.FormatUint(h.seq, 10))); err != nil {
			return mapErr(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeEvery)
		for len(answered) < h.servers {
			m, err := h.replies.NextMsgWithContext(ctx)
			if err != nil {
				break // ask again
			}
			// "<server> <probe>": a probe sent before this call proves
			// nothing of the subscriptions made since.
			server, n, _ := strings.Cut(string(m.Data), " ")
			if seq, err := strconv.ParseUint(n, 10, 64); err == nil && seq >= first {
				answered[server] = true
			}
		}
		cancel()
	}
	h.known.Store(want)
	return nil
}
