package actorrt

import (
	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/wire"
)

// Malformed messages (see wire.DropKind) are dropped and counted by kind;
// the first of each kind is written to the system log (one line per kind,
// not one per message, so that a flood cannot flood the log).

// drop counts a dropped message; the first of its kind is logged.
func (rt *runtimeT) drop(k wire.DropKind, subject string, err error) {
	if rt.drops.Add(k) == 1 {
		rt.log.Warn().Err(err).Str("drop", k.String()).Str("subject", subject).
			Msg("dropped a malformed message; later ones of this kind are counted, not logged")
	}
}

// dropCounts is every drop counter of this process: the dispatcher's and
// its bus connection's (as bus-<kind>).
func (rt *runtimeT) dropCounts() map[string]uint64 {
	out := make(map[string]uint64, len(wire.DropKinds())+len(bus.DropKinds()))
	for _, k := range wire.DropKinds() {
		out[k.String()] = rt.drops.Load(k)
	}
	if rt.conn != nil {
		for _, k := range bus.DropKinds() {
			out["bus-"+k.String()] = rt.conn.Dropped(k)
		}
	}
	return out
}
