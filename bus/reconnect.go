package bus

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Reconnecting. A Conn made with ConnOptions.ReconnectFor lets NATS
// reconnect a link that drops (the server restarted its listener, a
// stall cut the connection, a network blip), to the same server or, when
// that one is gone, to another of its hub, for at most that long; past
// it the link is lost, and the Conn ends as one that never reconnects.
// Coming back, NATS makes every subscription again before it sends what
// was buffered; with several hub servers the next Publish waits until
// all of them know (hubsync.go).

// reconnectWait is how long between reconnect attempts (with up to as
// much again of jitter, so that many procs do not reconnect at once).
const reconnectWait = 50 * time.Millisecond

// downTimer ends a link that stays down for too long.
type downTimer struct {
	mu    sync.Mutex
	timer *time.Timer
}

func (c *Conn) reconnectOptions(o ConnOptions) []nats.Option {
	var down downTimer
	link := func(up bool, err error) {
		if o.OnLink != nil {
			o.OnLink(up, err)
		}
	}
	return []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(reconnectWait, reconnectWait),
		nats.ReconnectBufSize(o.ReconnectBuffer),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if c.closing.Load() {
				return
			}
			if err == nil {
				err = errors.New("the link dropped")
			}
			down.mu.Lock()
			if down.timer == nil {
				cause := err
				down.timer = time.AfterFunc(o.ReconnectFor, func() {
					c.report(fmt.Errorf("%w: link lost: down for %v: %w", ErrClosed, o.ReconnectFor, cause))
					c.lostLink.Store(true)
					nc.Close()
				})
			}
			down.mu.Unlock()
			link(false, err)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.relinks.Add(1) // the hub's servers may not all know the subscriptions made again
			down.mu.Lock()
			if down.timer != nil {
				down.timer.Stop()
				down.timer = nil
			}
			down.mu.Unlock()
			link(true, nil)
		}),
	}
}
