package hostsconfig

import (
	"fmt"
	"time"
)

// Health is the [health] table: how the job tells a late host from a lost
// one. A host agent heartbeats every Heartbeat. One silent for
// HostTimeout is suspected, not lost: it is lost when a second signal
// confirms it, its link to the launcher down (its process ended: at
// once; its host down or the network cut: after LinkTimeout without an
// answer from its kernel), or its silence lasting LostAfter while its
// host still answers (an agent stopped or wedged). A heartbeat clears a
// suspicion.
type Health struct {
	Heartbeat   time.Duration // default DefaultHeartbeat
	HostTimeout time.Duration // default DefaultHostTimeout
	LinkTimeout time.Duration // default DefaultLinkTimeout
	LostAfter   time.Duration // default DefaultLostAfter
}

// The [health] defaults.
const (
	DefaultHeartbeat   = time.Second
	DefaultHostTimeout = 5 * time.Second
	DefaultLinkTimeout = 3 * time.Second
	DefaultLostAfter   = 30 * time.Second
)

// The [health] bounds.
const (
	MinHeartbeat   = 100 * time.Millisecond
	MaxHeartbeat   = time.Minute
	MinLinkTimeout = 3 * time.Second // TCP keepalive counts whole seconds: an idle one, two probes
	MaxTimeout     = time.Hour
)

// DefaultHealth is [health] with nothing given.
func DefaultHealth() Health {
	return Health{Heartbeat: DefaultHeartbeat, HostTimeout: DefaultHostTimeout, LinkTimeout: DefaultLinkTimeout, LostAfter: DefaultLostAfter}
}

// Check says what is wrong with h, naming keys as the file does.
func (h Health) Check() error {
	if key, msg := h.problem(); key != "" {
		return fmt.Errorf("%s: %s", key, msg)
	}
	return nil
}

// problem names the first key of h that is out of bounds, and why.
func (h Health) problem() (key, msg string) {
	switch {
	case h.Heartbeat < MinHeartbeat || h.Heartbeat > MaxHeartbeat:
		return "heartbeat", fmt.Sprintf("want from %v to %v, got %v", MinHeartbeat, MaxHeartbeat, h.Heartbeat)
	case h.HostTimeout < 2*h.Heartbeat || h.HostTimeout > MaxTimeout:
		return "host_timeout", fmt.Sprintf("want at least twice heartbeat (%v) and at most %v, got %v", 2*h.Heartbeat, MaxTimeout, h.HostTimeout)
	case h.LinkTimeout < MinLinkTimeout || h.LinkTimeout > MaxTimeout:
		return "link_timeout", fmt.Sprintf("want from %v to %v, got %v", MinLinkTimeout, MaxTimeout, h.LinkTimeout)
	case h.LostAfter <= h.HostTimeout || h.LostAfter > MaxTimeout:
		return "lost_after", fmt.Sprintf("want more than host_timeout (%v) and at most %v, got %v", h.HostTimeout, MaxTimeout, h.LostAfter)
	}
	return "", ""
}

func readHealth(t *table) Health {
	h := DefaultHealth()
	t.unknown("heartbeat", "host_timeout", "link_timeout", "lost_after")
	t.duration("heartbeat", &h.Heartbeat)
	t.duration("host_timeout", &h.HostTimeout)
	t.duration("link_timeout", &h.LinkTimeout)
	t.duration("lost_after", &h.LostAfter)
	key, msg := h.problem()
	switch {
	case key == "":
		return h
	case t.has(key):
		t.fail(key, "%s", msg)
	default: // a default out of bounds with what was given
		t.failTable("%s: %s", t.name(key), msg)
	}
	return DefaultHealth()
}
