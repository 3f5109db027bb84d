package actorrt

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/delivery"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"
)

// node is this process's place on the job's bus: its link, its proc id,
// its ports, what it knows of the job's health, and the sending of
// frames. The client and every proc hold one (in their runtime).
type node struct {
	job      string
	procID   string
	subjects jobenv.Subjects
	link     link
	ports    portTable
	health   *health
	delivery *delivery.Layer
	started  atomic.Bool // delivery is made (start): the link's news may go to it
	drops    wire.Drops  // malformed messages dropped, by kind
	log      zerolog.Logger

	// received counts the frames the dispatcher took, by kind, and the
	// notices of ends among them: what tests read to see who got what.
	received [wire.NumKinds]atomic.Uint64
	notices  atomic.Uint64
}

// linkChanged hears the bus link drop and come back: what was lost while
// it was down is asked for at once.
func (n *node) linkChanged(up bool, err error) {
	if up && n.started.Load() {
		n.delivery.LinkUp()
	}
}

// publish sends data on subject; a closed link is ErrStopped.
func (n *node) publish(subject string, data []byte) error {
	if err := n.link.Publish(subject, data); err != nil {
		if errors.Is(err, bus.ErrClosed) {
			return fmt.Errorf("%w: %v", ErrStopped, err)
		}
		return err
	}
	return nil
}

// sendToPort sends a value (or, with wire.FlagError, an error) to a port.
// Every reply and every Port.Send goes through here. It fails at once for
// a port on a proc known to be gone, or a port known to be closed.
func (n *node) sendToPort(to portRef, flags uint8, body func(*msgpack.Encoder) error) error {
	if err := n.health.portUsable(to); err != nil {
		return err
	}
	if to.once {
		n.health.answered(to)
	}
	h := wire.Header{Kind: wire.KindPort, Port: to.id, Rank: to.rank, Flags: flags, ReplyTo: n.procID}
	w := wire.NewPayload(&h, n.link.MaxMessage())
	defer w.Free()
	if err := body(w.Enc); err != nil {
		what := fmt.Sprintf("a value for %s#%d", to.proc, to.id)
		if tl := w.TooLarge(what, err); tl != nil {
			return tl
		}
		return fmt.Errorf("%w: encode %s: %v", ErrDecode, what, err)
	}
	return n.delivery.Send(w, &h, n.delivery.ToProc(to.proc))
}

// sendErrorToPort sends err to a port.
func (n *node) sendErrorToPort(to portRef, err error) error {
	we := toWireError(err)
	return n.sendToPort(to, wire.FlagError, func(e *msgpack.Encoder) error { return e.Encode(&we) })
}

// sendControl sends a control op to a proc (or a subject of the job, with
// sendControlOn), with an optional reply port.
func (n *node) sendControl(proc, op string, port uint64, body any) error {
	return n.sendControlTo(n.delivery.ToProc(proc), op, port, body)
}

// sendControlOn sends a control op on a subject of the job that is not a
// proc's (deaths, agents): not sequenced.
func (n *node) sendControlOn(subject, op string, port uint64, body any) error {
	return n.sendControlTo(delivery.Unsequenced(subject), op, port, body)
}

func (n *node) sendControlTo(d delivery.Dest, op string, port uint64, body any) error {
	h := wire.Header{Kind: wire.KindControl, Method: op, Port: port, ReplyTo: n.procID, Rank: -1}
	w := wire.NewPayload(&h, n.link.MaxMessage())
	defer w.Free()
	if err := w.Enc.Encode(body); err != nil {
		if tl := w.TooLarge(op+" request", err); tl != nil {
			return tl
		}
		return fmt.Errorf("actorrt: encode %s: %w", op, err)
	}
	return n.delivery.Send(w, &h, d)
}

// undeliverable handles a message for a port that is not open here. If
// the port was opened here and has closed since, the sender is told, so
// that its next send fails. A port that was never opened here is not
// closed: saying it is would make the sender refuse, for good, the answer
// to the call that opens it later (port ids are handed out in order). Such
// a message is misrouted or forged; it is dropped.
func (n *node) undeliverable(f *wire.Frame, subject string) {
	if f.Port == 0 || !n.ports.wasOpened(f.Port) {
		n.drop(wire.DropIDs, subject, fmt.Errorf("a message for port %d, never opened here (from %.40q)", f.Port, f.ReplyTo))
		return
	}
	if !wire.ValidID(f.ReplyTo) {
		return // nobody to tell
	}
	n.sendControl(f.ReplyTo, wire.OpPortGone, 0, &wire.PortGone{ID: f.Port})
}

// Malformed messages. Any process holding the job's token can publish
// anything to a proc: a bug in another version of the program, or worse.
// A message the runtime cannot read, or that names nothing it could act
// on, is dropped and counted by kind; the first of each kind is written
// to the system log (one line per kind, not one per message, so that a
// flood cannot flood the log). A drop never ends the proc, never fails the
// calls waiting on it, and never changes what the proc knows about the
// job (gone procs, closed ports, failures).

// drop counts a dropped message; the first of its kind is logged.
func (n *node) drop(k wire.DropKind, subject string, err error) {
	if n.drops.Add(k) == 1 {
		n.log.Warn().Err(err).Str("drop", k.String()).Str("subject", subject).
			Msg("dropped a malformed message; later ones of this kind are counted, not logged")
	}
}

// dropCounts is every drop counter of this process: the dispatcher's and
// its link's (as bus-<kind>).
func (n *node) dropCounts() map[string]uint64 {
	out := make(map[string]uint64, len(wire.DropKinds())+len(bus.DropKinds()))
	for _, k := range wire.DropKinds() {
		out[k.String()] = n.drops.Load(k)
	}
	for _, k := range bus.DropKinds() {
		out["bus-"+k.String()] = n.link.Dropped(k)
	}
	return out
}
