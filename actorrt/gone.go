package actorrt

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// What a proc knows about the rest of the job's health: procs that are
// gone (announced on the job's deaths subject by the host agent that saw
// them end), ports that are closed (learned when a send to them was
// undeliverable), and the reply ports its explicit-response endpoints
// still owe an answer.

type health struct {
	nGone   atomic.Int32 // len(gone), for a lock-free fast path
	nClosed atomic.Int32 // len(closed), likewise
	mu      sync.Mutex
	gone    map[string]wire.GoneNotice
	closed  map[portKey]bool // bounded: reset when it grows past closedMax
	owed    map[portRef]*actor

	agentOf  map[string]string    // proc -> the agent that started it
	lastBeat map[string]time.Time // watched agents -> their last heartbeat
}

type portKey struct {
	proc string
	id   uint64
}

const closedMax = 1 << 14

func (rt *runtimeT) deathsSubject() string { return "mon." + rt.job + ".deaths" }

// procGone records that proc ended and fails everything waiting on it.
func (rt *runtimeT) procGone(n wire.GoneNotice) {
	rt.health.mu.Lock()
	if rt.health.gone == nil {
		rt.health.gone = map[string]wire.GoneNotice{}
	}
	if _, dup := rt.health.gone[n.Proc]; dup {
		rt.health.mu.Unlock()
		return
	}
	rt.health.gone[n.Proc] = n
	rt.health.nGone.Store(int32(len(rt.health.gone)))
	rt.health.mu.Unlock()
	if rt.counts != nil {
		rt.counts.gone(n.Proc)
	}
	rt.ports.failWaiting(n.Proc, goneError(n))
	rt.failuresOnProc(n)
	rt.goneWithAgent(n.Proc, n.Reason)
}

func goneError(n wire.GoneNotice) error {
	if n.Stopped {
		return fmt.Errorf("%w: proc %s was stopped", ErrStopped, n.Proc)
	}
	return fmt.Errorf("%w: proc %s: %s", ErrProcFailed, n.Proc, n.Reason)
}

// goneProc returns why proc is gone, or nil.
func (rt *runtimeT) goneProc(proc string) error {
	if rt.health.nGone.Load() == 0 {
		return nil
	}
	rt.health.mu.Lock()
	defer rt.health.mu.Unlock()
	if n, ok := rt.health.gone[proc]; ok {
		return goneError(n)
	}
	return nil
}

// meshUsable fails a send to a region with a member on a gone proc.
func (rt *runtimeT) meshUsable(ref *meshRef, reg region) error {
	if ref.stopped.Load() {
		return fmt.Errorf("%w: mesh %s was stopped", ErrStopped, ref.name)
	}
	if rt.health.nGone.Load() == 0 {
		return nil
	}
	for _, p := range ref.procsOf(reg) {
		if err := rt.goneProc(p); err != nil {
			for b, q := range ref.procs {
				if q == p {
					return fmt.Errorf("%s: member %v: %w", ref.name, reg.base.point(b), err)
				}
			}
			return fmt.Errorf("%s: %w", ref.name, err)
		}
	}
	return nil
}

// portUsable fails a send to a port known to be unreachable.
func (rt *runtimeT) portUsable(to portRef) error {
	if err := rt.goneProc(to.proc); err != nil {
		return fmt.Errorf("actorrt: send to port %s#%d: %w", to.proc, to.id, err)
	}
	if rt.health.nClosed.Load() == 0 {
		return nil // the common case: no send of this proc was ever undeliverable
	}
	rt.health.mu.Lock()
	closed := rt.health.closed[portKey{to.proc, to.id}]
	rt.health.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: port %s#%d is closed", ErrStopped, to.proc, to.id)
	}
	return nil
}

// undeliverable handles a message for a port that is not open here. If
// the port was opened here and has closed since, the sender is told, so
// that its next send fails. A port that was never opened here is not
// closed: saying it is would make the sender refuse, for good, the answer
// to the call that opens it later (port ids are handed out in order). Such
// a message is misrouted or forged; it is dropped.
func (rt *runtimeT) undeliverable(f *wire.Frame, subject string) {
	if f.Port == 0 || !rt.ports.wasOpened(f.Port) {
		rt.drop(wire.DropIDs, subject, fmt.Errorf("a message for port %d, never opened here (from %.40q)", f.Port, f.ReplyTo))
		return
	}
	if !wire.ValidID(f.ReplyTo) {
		return // nobody to tell
	}
	rt.sendControl(f.ReplyTo, wire.OpPortGone, 0, &wire.PortGone{ID: f.Port})
}

// portClosed records that a port of proc is closed: sends to it fail from
// now on. The table is bounded: past closedMax entries it starts again,
// and a forgotten port is learned again at its next send.
func (rt *runtimeT) portClosed(proc string, id uint64) {
	rt.health.mu.Lock()
	defer rt.health.mu.Unlock()
	if rt.health.closed == nil || len(rt.health.closed) >= closedMax {
		rt.health.closed = map[portKey]bool{}
	}
	rt.health.closed[portKey{proc, id}] = true
	rt.health.nClosed.Store(int32(len(rt.health.closed)))
}

// portNamedOpen unmarks a port its own proc names as a reply port: it is
// open, whatever a notice said before (ids are never reused, so a port
// that really closed is never named again).
func (rt *runtimeT) portNamedOpen(proc string, id uint64) {
	if rt.health.nClosed.Load() == 0 {
		return // the common case: nothing marked closed
	}
	rt.health.mu.Lock()
	defer rt.health.mu.Unlock()
	if rt.health.closed[portKey{proc, id}] {
		delete(rt.health.closed, portKey{proc, id})
		rt.health.nClosed.Store(int32(len(rt.health.closed)))
	}
}

// owe records that actor a must answer on port to.
func (rt *runtimeT) owe(to portRef, a *actor) {
	rt.health.mu.Lock()
	defer rt.health.mu.Unlock()
	if rt.health.owed == nil {
		rt.health.owed = map[portRef]*actor{}
	}
	rt.health.owed[to] = a
}

// answered records that port to got its answer; it reports whether it was
// owed.
func (rt *runtimeT) answered(to portRef) bool {
	rt.health.mu.Lock()
	defer rt.health.mu.Unlock()
	_, ok := rt.health.owed[to]
	delete(rt.health.owed, to)
	return ok
}

// failOwed answers every port actor a still owes with err.
func (rt *runtimeT) failOwed(a *actor, err error) {
	var refs []portRef
	rt.health.mu.Lock()
	for ref, owner := range rt.health.owed {
		if owner == a {
			refs = append(refs, ref)
			delete(rt.health.owed, ref)
		}
	}
	rt.health.mu.Unlock()
	for _, ref := range refs {
		ref.once = false // already struck from the table
		rt.sendErrorToPort(ref, err)
	}
}

// announceGone publishes that proc ended, to every proc of the job.
func (rt *runtimeT) announceGone(n wire.GoneNotice) {
	h := wire.Header{Kind: wire.KindControl, Method: wire.OpGone, ReplyTo: rt.procID, Rank: -1}
	w, err := rt.newFrame(&h)
	if err != nil {
		return
	}
	defer w.Free()
	if err := w.Enc.Encode(&n); err != nil {
		return
	}
	rt.publish(rt.deathsSubject(), w.Bytes())
}

func decodeBody(f *wire.Frame, v any) error {
	return wire.DecodePayload(f.Payload, []reflect.Type{reflect.TypeOf(v)}, func(d *msgpack.Decoder) error { return d.Decode(v) })
}
