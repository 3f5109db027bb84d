package bus

import (
	"fmt"
	"sync/atomic"

	"github.com/monarch-go/monarch/internal/dropnames"
)

// DropKind is a kind of received message that a Conn drops instead of
// handing it to Run's handler. None of them ends the connection or
// affects the messages around it: a buggy or hostile peer holding the
// job's token can waste a receiver's time, not break its link.
type DropKind uint8

const (
	// DropBatch: a batch whose header or contents do not add up.
	DropBatch DropKind = iota
	// DropChunk: a chunk header that cannot be read, parts that do not fit
	// the message they claim to belong to, or parts missing or out of order.
	DropChunk
	// DropChunkExpired: a chunked message still incomplete PartialTTL after
	// its first part (its sender died or lost parts).
	DropChunkExpired
	// DropChunkLimit: a chunked message whose parts would take the bytes
	// held for reassembly past ConnOptions.MaxReassembly.
	DropChunkLimit
	// DropHeader: a message with NATS headers that are neither a batch's
	// nor a chunk's.
	DropHeader

	numDropKinds
)

// dropKinds has a name for each kind (the array's length checks it).
var dropKinds = dropnames.Names[DropKind]((&[numDropKinds]string{"batch", "chunk", "chunk-expired", "chunk-limit", "header"})[:])

func (k DropKind) String() string { return dropKinds.Name(k) }

// DropKinds lists every kind, for reporting.
func DropKinds() []DropKind { return dropKinds.All() }

// DropError describes a dropped message. The first drop of each kind
// reaches ConnOptions.OnError as a *DropError; later ones are only
// counted (Conn.Dropped), so a flood of bad messages cannot flood the logs.
type DropError struct {
	Kind    DropKind
	Subject string
	Reason  string
}

func (e *DropError) Error() string {
	return fmt.Sprintf("bus: dropped a malformed message (%s) on %s: %s; later drops of this kind are counted, not reported", e.Kind, e.Subject, e.Reason)
}

func (e *DropError) Unwrap() error { return ErrMalformed }

// drops counts dropped messages by kind.
type drops [numDropKinds]atomic.Uint64

// Dropped is how many received messages of kind k this connection has
// dropped.
func (c *Conn) Dropped(k DropKind) uint64 {
	if k >= numDropKinds {
		return 0
	}
	return c.drops[k].Load()
}

// drop counts a dropped message and reports the first of its kind.
func (c *Conn) drop(k DropKind, subject, format string, args ...any) {
	if c.drops[k].Add(1) == 1 {
		c.report(&DropError{Kind: k, Subject: subject, Reason: fmt.Sprintf(format, args...)})
	}
}
