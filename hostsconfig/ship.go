package hostsconfig

import (
	"path"
	"strings"
)

// Ship is the [ship] table: whether the launcher sends the job's program
// and the monarch binary to the hosts (over the ssh session, or with
// Slurm's sbcast) into a cache on each host, instead of running them from
// their paths there. Local hosts are this machine: a [ship] table is an
// error there.
//
// What is trusted: with SendAuto and SendAlways, the hosts run only
// copies in their cache that have the sha256 of the launcher's files and
// that, with the cache folder and every folder above it, belong to the
// user or root and are writable by no one else (a folder of root's with
// the sticky bit, /tmp, may be); with SendNever, the paths as given, the
// agent still refusing a program that breaks that rule.
//
// The zero Ship is the default: send = "auto", the default cache.
type Ship struct {
	// Send is SendAuto (send = "auto", the default), SendAlways
	// (send = true) or SendNever (send = false).
	Send ShipSend
	// Cache is the directory of the binary cache on the hosts: an
	// absolute path, or one starting with "~/" (the home directory on the
	// host). Empty: DefaultShipCache. It and the folders above it must
	// be writable by no one but the user (or root) on every host.
	Cache string
}

// ShipSend is [ship] send: when the launcher sends a binary.
type ShipSend int

// The values of Ship.Send.
const (
	// SendAuto sends a binary to the hosts that lack it: those with
	// neither a cached copy of the same content nor a file of the same
	// content at its path, in folders only the user or root can write
	// (copied into the cache, and run from there, instead).
	SendAuto ShipSend = iota
	// SendAlways sends a binary to every host without a cached copy of
	// the same content, even where its path holds the same file.
	SendAlways
	// SendNever runs the binaries from their paths on the hosts, as
	// given: trusted as the user named them, but for the program, which
	// the agent refuses if another user could have put it there.
	SendNever
)

// String is the value as the hosts file writes it.
func (s ShipSend) String() string {
	switch s {
	case SendAlways:
		return "true"
	case SendNever:
		return "false"
	}
	return `"auto"`
}

// DefaultShipCache is where the hosts keep the binaries sent to them when
// [ship] cache is not given: ~/.cache/monarch/bin, or
// $XDG_CACHE_HOME/monarch/bin where the host's environment sets
// XDG_CACHE_HOME.
const DefaultShipCache = "~/.cache/monarch/bin"

// readShip reads the [ship] table of a hosts file whose scheduler is
// sched.
func readShip(t *table, sched string) Ship {
	var s Ship
	if sched == SchedulerLocal {
		if t.m != nil {
			t.failTable("[%s] given but scheduler is %q: local hosts are this machine, which has the binaries already", strings.Join(t.key, "."), sched)
		}
		return s
	}
	t.unknown("send", "cache")
	if v, ok := t.m["send"]; ok {
		switch v {
		case true:
			s.Send = SendAlways
		case false:
			s.Send = SendNever
		case "auto":
		default:
			t.fail("send", `want true (always send), false (never) or "auto" (send to hosts that lack a binary), got %s`, describeValue(v))
		}
	}
	if t.str("cache", &s.Cache) {
		c := s.Cache
		rest, home := strings.CutPrefix(c, "~/")
		switch {
		case c == "" || !home && !path.IsAbs(c):
			t.fail("cache", `want an absolute path on the hosts, or one starting with "~/" (their home), got %q`, c)
			s.Cache = ""
		case strings.ContainsAny(c, "\x00\n\r"):
			t.fail("cache", "the path %q contains a control character", c)
			s.Cache = ""
		case home && rest == "" || path.Clean(c) == "/":
			t.fail("cache", "%q is a home or root directory: give a directory of its own, such as \"~/.cache/monarch/bin\"", c)
			s.Cache = ""
		}
	}
	return s
}
