package actorrt

import (
	"context"

	"github.com/monarch-go/monarch/bus"
)

// link is this process's connection to the job's bus, as the runtime uses
// it. It is the seam behind which the bus may be one server, a leaf node
// per host, or a link that reconnects; busLink, over a *bus.Conn, is the
// one there is.
type link interface {
	// Publish sends data on subject; it fails once the link is closed.
	Publish(subject string, data []byte) error
	// PublishParts sends the parts, one after the other, as one message.
	PublishParts(subject string, parts [][]byte) error
	// PublishNow is PublishParts without waiting in a batch of the
	// link's (the delivery layer batches runs itself).
	PublishNow(subject string, parts [][]byte) error
	Subscribe(subject string) (subscription, error)
	// Watch calls fn on each message of subject as it arrives, beside
	// Run's ordered path (bus.Conn.Watch).
	Watch(subject string, fn func(bus.Message)) (subscription, error)
	// Run hands every message of every subscription to handle, one at a
	// time, in the order they arrived, until ctx ends or the link is lost
	// (bus.ErrClosed).
	Run(ctx context.Context, handle func(bus.Message)) error
	// Flush waits until everything published so far has reached the bus.
	Flush(ctx context.Context) error
	// MaxMessage is the largest message the link sends and takes.
	MaxMessage() int
	// Dropped counts the malformed messages the link dropped, by kind.
	Dropped(k bus.DropKind) uint64
	// Stats is its traffic so far (bus.Conn.Stats).
	Stats() bus.Stats
	Close()
}

// subscription is a subject a link delivers.
type subscription interface{ Unsubscribe() error }

// busLink is a link over a bus connection.
type busLink struct{ *bus.Conn }

var _ link = busLink{}

func (l busLink) Subscribe(subject string) (subscription, error) {
	s, err := l.Conn.Subscribe(subject)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (l busLink) Watch(subject string, fn func(bus.Message)) (subscription, error) {
	s, err := l.Conn.Watch(subject, fn)
	if err != nil {
		return nil, err
	}
	return s, nil
}
