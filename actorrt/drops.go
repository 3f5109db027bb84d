package actorrt

import (
	"sync/atomic"

	"github.com/monarch-go/monarch/bus"
)

// Malformed messages. Any process holding the job's token can publish
// anything to a proc: a bug in another version of the program, or worse.
// A message the runtime cannot read, or that names nothing it could act
// on, is dropped and counted by kind; the first of each kind is written
// to the system log (one line per kind, not one per message, so that a
// flood cannot flood the log). A drop never ends the proc, never fails the
// calls waiting on it, and never changes what the proc knows about the
// job (gone procs, closed ports, failures).

// dropKind is a kind of message the dispatcher drops.
type dropKind uint8

const (
	dropFrame  dropKind = iota // a frame or header that cannot be read
	dropKindOf                 // a message of no known kind
	dropRegion                 // a region that does not fit its mesh
	dropBody                   // a control body that cannot be decoded
	dropIDs                    // empty or invalid ids, or ids of nothing here (mesh, port)
	dropOp                     // a control op that does not exist
	numDropKinds
)

var dropKindNames = [numDropKinds]string{"frame", "kind", "region", "body", "ids", "op"}

func (k dropKind) String() string { return dropKindNames[k] }

// drops counts the messages dropped, by kind.
type drops [numDropKinds]atomic.Uint64

// drop counts a dropped message; the first of its kind is logged.
func (rt *runtimeT) drop(k dropKind, subject string, err error) {
	if rt.drops[k].Add(1) == 1 {
		rt.log.Warn().Err(err).Str("drop", k.String()).Str("subject", subject).
			Msg("dropped a malformed message; later ones of this kind are counted, not logged")
	}
}

// dropCounts is every drop counter of this process: the dispatcher's and
// its bus connection's (as bus-<kind>).
func (rt *runtimeT) dropCounts() map[string]uint64 {
	out := make(map[string]uint64, int(numDropKinds)+len(bus.DropKinds()))
	for k := range numDropKinds {
		out[k.String()] = rt.drops[k].Load()
	}
	if rt.conn != nil {
		for _, k := range bus.DropKinds() {
			out["bus-"+k.String()] = rt.conn.Dropped(k)
		}
	}
	return out
}
