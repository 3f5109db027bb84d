package wire

import (
	"sync/atomic"

	"github.com/monarch-go/monarch/internal/dropnames"
)

// DropKind is a kind of malformed message a receiver drops. Any process
// holding the job's token can publish anything to a proc: a bug in
// another version of the program, or worse. A message that cannot be
// read, or that names nothing the receiver could act on, is dropped and
// counted by kind; a drop never ends the receiver, never fails the calls
// waiting on it, and never changes what it knows about the job.
type DropKind uint8

const (
	DropFrame   DropKind = iota // a frame or header that cannot be read
	DropKindOf                  // a message of no known kind
	DropRegion                  // a region that does not fit its mesh
	DropBody                    // a control body that cannot be decoded
	DropIDs                     // empty or invalid ids, or ids of nothing here (mesh, port)
	DropOp                      // a control op that does not exist
	DropSender                  // numbered frames of a sender past the bounds, or made up (see internal/reliable)
	DropArgs                    // an actor message whose arguments cannot be decoded
	DropPayload                 // a payload sent out of band that cannot be read (gone, or not what its frame says)
	numDropKinds
)

// dropKinds has a name for each kind (the array's length checks it).
var dropKinds = dropnames.Names[DropKind]((&[numDropKinds]string{"frame", "kind", "region", "body", "ids", "op", "sender", "args", "payload"})[:])

func (k DropKind) String() string { return dropKinds.Name(k) }

// DropKinds lists every kind, for reporting.
func DropKinds() []DropKind { return dropKinds.All() }

// Drops counts dropped messages by kind. The zero value is ready to use;
// it is safe for concurrent use.
type Drops [numDropKinds]atomic.Uint64

// Add counts one drop of kind k and returns the count so far: 1 for the
// first, which the caller may log (the later ones only counted, so that a
// flood of bad messages cannot flood the log).
func (d *Drops) Add(k DropKind) uint64 { return d[k].Add(1) }

// Load is the number of drops of kind k so far.
func (d *Drops) Load(k DropKind) uint64 { return d[k].Load() }
