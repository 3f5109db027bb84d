package actorrt

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/monarch-go/monarch/actorrt/internal/liveness"
	"github.com/monarch-go/monarch/internal/wire"
)

// health drives this process's liveness.Table (who is gone) and keeps the
// two other things a send checks first: ports known to be closed (learned
// when a send to them was undeliverable) and the reply ports this
// process's explicit-response endpoints still owe an answer. It is safe
// for concurrent use; the common case (nothing gone, nothing closed) costs
// an atomic load.
type health struct {
	// apply carries out what the table asks for; it is called without
	// the lock held, in the order the effects came out.
	apply func(effects []liveness.Effect)

	nGone   atomic.Int32 // the table's NumGone, for a lock-free fast path
	nClosed atomic.Int32 // len(closed), likewise

	mu     sync.Mutex
	table  *liveness.Table
	closed map[portKey]bool // bounded: reset when it grows past closedMax
	owed   map[portRef]*actor
}

type portKey struct {
	proc string
	id   uint64
}

const closedMax = 1 << 14

func newHealth(self string, hostTimeout, lostAfter time.Duration, apply func([]liveness.Effect)) *health {
	return &health{apply: apply, table: liveness.NewTable(self, hostTimeout, lostAfter)}
}

// step runs one event, a method of the table, and carries out its
// effects.
func (h *health) step(event func(*liveness.Table) []liveness.Effect) {
	h.mu.Lock()
	effects := event(h.table)
	h.nGone.Store(int32(h.table.NumGone()))
	h.mu.Unlock()
	if len(effects) > 0 {
		h.apply(effects)
	}
}

// gone records that a proc ended; announce tells the job (the process
// that saw the end does; one that heard of it from the job does not).
func (h *health) gone(n wire.GoneNotice, announce bool) {
	h.step(func(t *liveness.Table) []liveness.Effect { return t.ProcGone(n, announce) })
}

// started records which agent started each of procs; fresh says this
// process is spawning them now (else they arrived from elsewhere, and may
// have ended already).
func (h *health) started(procs []procInfo, fresh bool) {
	at := time.Now()
	ps := make([]liveness.Proc, len(procs))
	for i, p := range procs {
		ps[i] = liveness.Proc{ID: p.ID, Agent: p.Agent, Host: p.Host}
	}
	h.step(func(t *liveness.Table) []liveness.Effect { return t.Started(ps, fresh, at) })
}

// heard takes a heartbeat of agent.
func (h *health) heard(agent string) {
	at := time.Now()
	h.step(func(t *liveness.Table) []liveness.Effect { return t.Heard(agent, at) })
}

// link takes the job's link watcher's word on agent's link.
func (h *health) link(agent string, up bool, cause string) {
	at := time.Now()
	h.step(func(t *liveness.Table) []liveness.Effect { return t.LinkChanged(agent, up, cause, at) })
}

// tick suspects silent agents and declares confirmed ones gone; starved says this process was
// starved itself since the last tick.
func (h *health) tick(now time.Time, starved bool) {
	h.step(func(t *liveness.Table) []liveness.Effect { return t.Tick(now, starved) })
}

func goneError(n wire.GoneNotice) error {
	if n.Stopped {
		return fmt.Errorf("%w: proc %s was stopped", ErrStopped, n.Proc)
	}
	return fmt.Errorf("%w: proc %s: %s", ErrProcFailed, n.Proc, n.Reason)
}

// goneErr returns why proc is gone, or nil.
func (h *health) goneErr(proc string) error {
	if h.nGone.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := h.table.Notice(proc); ok {
		return goneError(n)
	}
	return nil
}

// notice is why proc ended, if it did.
func (h *health) notice(proc string) (wire.GoneNotice, bool) {
	if h.nGone.Load() == 0 {
		return wire.GoneNotice{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.table.Notice(proc)
}

// knows says whether this process heard of proc or agent id, and whether
// it is gone.
func (h *health) knows(id string) (heard, gone bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.table.Knows(id)
}

// anyGone tells why one of procs is gone (stopped or failed), or nil.
func (h *health) anyGone(procs []string) error {
	for _, p := range procs {
		if err := h.goneErr(p); err != nil {
			return err
		}
	}
	return nil
}

// meshUsable fails a send to a region with a member on a gone proc.
func (h *health) meshUsable(ref *meshRef, reg region) error {
	if ref.stopped.Load() {
		return fmt.Errorf("%w: mesh %s was stopped", ErrStopped, ref.name)
	}
	if h.nGone.Load() == 0 {
		return nil
	}
	for _, p := range ref.sendProcs(reg) {
		if err := h.goneErr(p); err != nil {
			for b := range ref.procs {
				if ref.procOf(b) == p {
					return fmt.Errorf("%s: member %v: %w", ref.name, reg.base.point(b), err)
				}
			}
			return fmt.Errorf("%s: %w", ref.name, err)
		}
	}
	return nil
}

// portUsable fails a send to a port known to be unreachable.
func (h *health) portUsable(to portRef) error {
	if err := h.goneErr(to.proc); err != nil {
		return fmt.Errorf("actorrt: send to port %s#%d: %w", to.proc, to.id, err)
	}
	if h.nClosed.Load() == 0 {
		return nil // the common case: no send of this proc was ever undeliverable
	}
	h.mu.Lock()
	closed := h.closed[portKey{to.proc, to.id}]
	h.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: port %s#%d is closed", ErrStopped, to.proc, to.id)
	}
	return nil
}

// portClosed records that a port of proc is closed: sends to it fail from
// now on. The table is bounded: past closedMax entries it starts again,
// and a forgotten port is learned again at its next send.
func (h *health) portClosed(proc string, id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed == nil || len(h.closed) >= closedMax {
		h.closed = map[portKey]bool{}
	}
	h.closed[portKey{proc, id}] = true
	h.nClosed.Store(int32(len(h.closed)))
}

// portNamedOpen unmarks a port its own proc names as a reply port: it is
// open, whatever a notice said before (ids are never reused, so a port
// that really closed is never named again).
func (h *health) portNamedOpen(proc string, id uint64) {
	if h.nClosed.Load() == 0 {
		return // the common case: nothing marked closed
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed[portKey{proc, id}] {
		delete(h.closed, portKey{proc, id})
		h.nClosed.Store(int32(len(h.closed)))
	}
}

// owe records that actor a must answer on port to.
func (h *health) owe(to portRef, a *actor) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.owed == nil {
		h.owed = map[portRef]*actor{}
	}
	h.owed[to] = a
}

// answered records that port to got its answer; it reports whether it was
// owed.
func (h *health) answered(to portRef) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.owed[to]
	delete(h.owed, to)
	return ok
}

// takeOwed strikes every port actor a still owes from the table and
// returns them, to be answered with an error.
func (h *health) takeOwed(a *actor) []portRef {
	var refs []portRef
	h.mu.Lock()
	defer h.mu.Unlock()
	for ref, owner := range h.owed {
		if owner == a {
			delete(h.owed, ref)
			ref.once = false // struck from the table already
			refs = append(refs, ref)
		}
	}
	return refs
}

// parseLinkEvent reads what the job's link watcher says of an agent's
// link (jobenv.Subjects.Link): "up", or "down <cause>".
func parseLinkEvent(b []byte) (up bool, cause string, err error) {
	const maxCause = 512
	s := string(b)
	switch {
	case s == "up":
		return true, "", nil
	case len(s) > 5 && len(s) <= 5+maxCause && s[:5] == "down " && printable(s[5:]):
		return false, s[5:], nil
	}
	return false, "", fmt.Errorf("not a link event: %.40q", s)
}

// printable reports whether s is one line of printable UTF-8.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
