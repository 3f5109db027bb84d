package actorrt

import (
	"fmt"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/hostagent"
)

// Option configures Main.
type Option func(*options) error

type options struct {
	spawnTimeout time.Duration
	stopTimeout  time.Duration
	hostTimeout  time.Duration
	lostAfter    time.Duration // a silent host whose link is up is lost after this
	heartbeat    time.Duration // how often agents and procs beat
	maxMessage   int           // 0: the bus's default
	faultHook    func(*MeshFailure) error
	hookSet      bool // WithFaultHook was given: the default's advice is not printed
	// The bound of every actor's mailbox, and of every mesh's send queue.
	mailbox msgBound

	cleanupTimeout time.Duration // bounds an actor's Cleanup (cleanup.go)

	// starter starts this runtime's host agent's procs in this process
	// (an in-process cluster's, inproc.go); nil: the agent executes them.
	starter hostagent.Starter
	// unlisted: the job keeps no record for monarch status (an in-process
	// cluster's job is a test's, not one of the user's jobs).
	unlisted bool
}

// defaultOptions are the options before Main's: the job's [health]
// (h) and the defaults.
func defaultOptions(h hostsconfig.Health) options {
	return options{spawnTimeout: 60 * time.Second, stopTimeout: 5 * time.Second, cleanupTimeout: DefaultCleanupTimeout,
		hostTimeout: h.HostTimeout, lostAfter: h.LostAfter, heartbeat: h.Heartbeat,
		faultHook: defaultFaultHook, mailbox: msgBound{DefaultMailboxMessages, DefaultMailboxBytes}}
}

// WithHostTimeout sets how long a host agent may be silent before its
// host is suspected; it is declared lost, and its procs failed, once its
// link to the launcher is down too (see the hosts file's [health]).
// Default: the hosts file's host_timeout, 5s unless set there. At least
// twice the heartbeat (1s unless set there); a host silent this long
// whose link stays up is lost after lost_after (30s), raised to six times
// d if that is not longer.
func WithHostTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 2*o.heartbeat {
			return fmt.Errorf("actorrt: host timeout %v must be at least %v", d, 2*o.heartbeat)
		}
		unconfirmed := o.lostAfter <= o.hostTimeout // no link watcher: see Run
		o.hostTimeout = d
		if unconfirmed {
			o.lostAfter = d
		} else if o.lostAfter <= d {
			o.lostAfter = 6 * d
		}
		return nil
	}
}

// WithSpawnTimeout bounds how long SpawnProcs waits for new procs to be
// ready and Spawn waits for every actor's Init. Default 60s.
func WithSpawnTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("actorrt: spawn timeout %v must be positive", d)
		}
		o.spawnTimeout = d
		return nil
	}
}

// WithMaxMessage sets the largest message this process sends and takes:
// a call's arguments, a reply, a value sent to a port. A larger one is
// refused at once with ErrTooLarge, the limit in the error, without being
// copied. Default bus.DefaultMaxMessage (1 GiB). It is a bound on memory,
// not on the bus: a payload past 256 KiB travels out of band, read by its
// receiver from the sender's memory. Every process of the job must agree
// (a receiver refuses a message over its own limit); procs that run this
// program's Main with the same options do.
func WithMaxMessage(bytes int) Option {
	return func(o *options) error {
		if bytes < 64<<10 {
			return fmt.Errorf("actorrt: max message %d must be at least 64 KiB", bytes)
		}
		o.maxMessage = bytes
		return nil
	}
}

// WithStopTimeout bounds how long a stopping proc is given to exit before
// it is killed. Default 5s.
func WithStopTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("actorrt: stop timeout %v must be positive", d)
		}
		o.stopTimeout = d
		return nil
	}
}

// The default bound of an actor's mailbox: messages waiting for it (queued
// or in hand), and the bytes of their arguments.
const (
	DefaultMailboxMessages = 1 << 20
	DefaultMailboxBytes    = 1 << 30
)

// WithMailboxLimit bounds every actor's mailbox: at most messages waiting,
// of at most bytes of arguments in all. A call that would pass the bound
// fails at once with ErrMailboxFull; a message nobody waits for (a
// Broadcast, a Send) that would pass it fails the actor, and its owner
// hears why: a flood is never held in unbounded memory, and never lost
// silently. The same bound holds the calls a sender queues for a mesh
// while it asks where a member whose proc ended lives now: past it, the
// adverb refuses the call at once with ErrMailboxFull (a Call's future
// fails with it; a Broadcast or Send returns it). Defaults
// DefaultMailboxMessages and DefaultMailboxBytes.
func WithMailboxLimit(messages int, bytes int64) Option {
	return func(o *options) error {
		if messages < 1 || bytes < 1 {
			return fmt.Errorf("actorrt: mailbox limit %d messages, %d bytes: both must be positive", messages, bytes)
		}
		o.mailbox = msgBound{int64(messages), bytes}
		return nil
	}
}

// busConnectFor is how long a process tries to reach its bus (a leaf
// still starting, a machine too busy to answer at once): well within the
// default spawn timeout, so that a proc that cannot is reported ended
// before its spawner gives up on it.
const busConnectFor = 30 * time.Second
