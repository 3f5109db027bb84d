package actorrt

import (
	"fmt"
	"math/rand/v2"

	"github.com/monarch-go/monarch/internal/delivery"
	"github.com/monarch-go/monarch/internal/wire"
)

// The adverbs (the methods Call, CallOne, Broadcast, Stream, Choose and
// Send of the endpoint types in adverbs_gen.go) are thin typed fronts for
// the functions here. Each sends one message to the mesh's subject, with
// the selected region in its header and, unless it is a Broadcast, a
// reply port of this proc; every member in the region answers on that
// port.

// binding is a method expression bound as an endpoint (Method and its
// kin): a function value, so binding costs nothing, at the call as in a
// var. The endpoint it names is looked up once per method, at its first
// use, and kept in the registry (endpointOf).
type binding struct{ fn any }

func bind(fn any) binding { return binding{fn} }

// endpoint is the endpoint b names in actor type at.
func (b binding) endpoint(at *actorType) (*method, error) {
	if b.fn == nil {
		return nil, fmt.Errorf("%w: the zero endpoint (bind one with actorrt.Method)", ErrBadEndpoint)
	}
	return endpointOf(b.fn, at)
}

// meshTarget is a (sliced) mesh as the adverbs see it.
type meshTarget struct {
	ref *meshRef
	reg region
	err error
}

// prepare checks the target and finds the endpoint b names.
func prepare(t meshTarget, b binding) (*core, *method, label, error) {
	what := label{"?", "?"}
	if t.ref != nil {
		what.mesh = t.ref.name
	}
	if t.err != nil {
		return nil, nil, what, t.err
	}
	if t.ref == nil {
		return nil, nil, what, fmt.Errorf("actorrt: mesh was not spawned (use Spawn)")
	}
	m, err := b.endpoint(t.ref.typ)
	if err != nil {
		return nil, nil, what, err
	}
	return t.ref.rt, m, label{t.ref.name, m.name}, nil
}

// outCall is one call, encoded, on its way to the members of reg.
type outCall struct {
	ref   *meshRef
	reg   region
	w     *wire.Writer
	h     wire.Header
	reply portRef
}

// send publishes one call to the members of reg; each answers on reply
// (a port of any proc) unless it is the zero port. This is the one way
// calls travel: every adverb is a port and a send. A call to a mesh whose
// members' places are being refreshed (sendQueue) is queued behind that
// refresh: send then returns at once, and what failed makes hears of a
// queued call that could not be sent (made only then: the usual send
// allocates no closure for it); one past the queue's bound is refused at once,
// with ErrMailboxFull.
func (rt *core) send(ref *meshRef, reg region, m *method, args callArgs, reply portRef, failed func() func(error)) error {
	unusable := rt.health.meshUsable(ref, reg)
	if unusable != nil && !ref.queue.due(ref, reg) {
		return unusable
	}
	// The call is encoded into a value of this frame: only one that is
	// queued is copied to the heap (sendQueue.add), so the usual send
	// allocates nothing for it.
	var c outCall
	if err := c.encode(ref, reg, m, args, reply); err != nil {
		return err
	}
	queued, err := ref.queue.add(&c, failed)
	if queued {
		return nil // the queue frees c's frame once sent
	}
	defer c.w.Free()
	if err != nil {
		return err // refused: past the queue's bound
	}
	if unusable != nil {
		return c.post() // not queued after all: check again
	}
	// Usable a moment ago: checking again (a lock and a lookup per proc
	// once any proc of the job has ended) was a twelfth of a Send.
	return c.publish()
}

// encode encodes a call now: the caller may change its arguments once
// the adverb returns, queued or not.
func (c *outCall) encode(ref *meshRef, reg region, m *method, args callArgs, reply portRef) error {
	*c = outCall{ref: ref, reg: reg, reply: reply, h: wire.Header{Kind: wire.KindActor, Target: ref.id, Method: m.name, Rank: -1}}
	if !reply.zero() {
		c.h.Port, c.h.ReplyTo = reply.id, reply.proc
	}
	if !reg.isWhole() {
		c.h.Region = reg.appendWire(make([]int, 0, 3*len(reg.start)))
	}
	w := wire.NewPayload(&c.h, ref.rt.link.MaxMessage())
	fail := func(err error) error {
		w.Free()
		return err
	}
	if i, err := args(w.Enc); err != nil {
		what := fmt.Sprintf("%s.%s argument %d", ref.name, m.name, i)
		if i == 0 {
			what = fmt.Sprintf("%s.%s arguments", ref.name, m.name)
		}
		if tl := w.TooLarge(what, err); tl != nil {
			return fail(tl)
		}
		return fail(fmt.Errorf("%w: %s: %v", ErrBadArgs, what, err))
	}
	c.w = w
	return nil
}

// post publishes an encoded call to a mesh still usable.
func (c *outCall) post() error {
	if err := c.ref.rt.health.meshUsable(c.ref, c.reg); err != nil {
		return err
	}
	return c.publish()
}

// publish publishes an encoded call.
func (c *outCall) publish() error {
	rt := c.ref.rt
	if err := rt.deliverTo(c.ref, c.reg, c.w, &c.h); err != nil {
		return err
	}
	if feedOn {
		rt.sent.count(c.ref, &c.reg)
	}
	return nil
}

// deliverTo publishes a call to exactly the procs that host members of
// reg: a whole mesh (or a slice that spans every proc of it) on the mesh's
// subject, one message the bus fans out; a smaller slice, a Choose or a
// single member on the subject of each proc that hosts one, so that no
// other proc receives it. Either way the frame is the same: each receiver
// finds its members of the mesh in the region.
func (rt *core) deliverTo(ref *meshRef, reg region, w *wire.Writer, h *wire.Header) error {
	if mv := ref.moves.Load(); mv != nil {
		return rt.deliverMoved(ref, reg, mv, w, h)
	}
	var procs []string
	if !reg.isWhole() {
		procs = ref.sendProcs(reg)
	}
	if reg.isWhole() || len(procs) == len(ref.all) {
		return rt.delivery.Send(w, h, ref.dest(rt.subjects))
	}
	if len(procs) == 1 {
		return rt.delivery.Send(w, h, rt.delivery.ToProc(procs[0]))
	}
	dests := make([]delivery.Dest, len(procs))
	for i, p := range procs {
		dests[i] = rt.delivery.ToProc(p)
	}
	return rt.delivery.SendAll(w, h, dests)
}

func callAdverb[R any](t meshTarget, b binding, args callArgs) *Future[ValueMesh[R]] {
	rt, m, what, err := prepare(t, b)
	if err != nil {
		return failedFuture[ValueMesh[R]](what, err)
	}
	fut := newFuture[ValueMesh[R]](what)
	p := newCallPort[R](fut, t.reg.extent())
	if p.skip(t.ref.missingIn(t.reg)) {
		return fut // every member is missing
	}
	if err := rt.sendOpen(t, m, args, p); err != nil {
		fut.resolve(ValueMesh[R]{}, err)
	}
	return fut
}

func callOneAdverb[R any](t meshTarget, b binding, args callArgs) *Future[R] {
	if t.err == nil && t.reg.numRanks() != 1 {
		t.err = fmt.Errorf("%w: %s has extent %v (%d actors)", ErrNotOne, t.ref.name, t.reg.extent(), t.reg.numRanks())
	}
	rt, m, what, err := prepare(t, b)
	if err != nil {
		return failedFuture[R](what, err)
	}
	if missing := t.ref.missingIn(t.reg); missing != nil {
		return failedFuture[R](what, t.ref.missingErr(missing[0]))
	}
	fut := newFuture[R](what)
	if err := rt.sendOpen(t, m, args, &onePort[R]{fut: fut}); err != nil {
		fut.resolve(*new(R), err)
	}
	return fut
}

func broadcastAdverb(t meshTarget, b binding, args callArgs) error {
	rt, m, what, err := prepare(t, b)
	if err != nil {
		return err
	}
	if missing := t.ref.missingIn(t.reg); len(missing) == t.reg.numRanks() {
		return nil // every member is missing: nobody to tell
	}
	return rt.send(t.ref, t.reg, m, args, portRef{}, func() func(error) { return lostSend(rt, what) })
}

// lostSend logs a queued Broadcast that could not be sent: no port waits
// for it and its caller has long returned; the members it missed are
// failed members, which their mesh's owner hears of (supervision).
func lostSend(rt *core, what label) func(error) {
	return func(err error) {
		rt.log.Warn().Err(err).Str("mesh", what.mesh).Str("method", what.method).Msg("a send queued behind a restart could not be sent")
	}
}

// sendAdverb is Send: every member answers on the caller's port.
func sendAdverb(t meshTarget, b binding, port portRef, args callArgs) error {
	rt, m, what, err := prepare(t, b)
	if err != nil {
		return err
	}
	if port.zero() {
		return fmt.Errorf("%w: Send to the zero Port (open one with OpenChannel)", ErrBadArgs)
	}
	// A queued Send that cannot be sent tells the port, where the
	// members' answers would have gone: its receiver is waiting for them.
	failed := func() func(error) {
		lost := lostSend(rt, what)
		return func(err error) {
			err = fmt.Errorf("%s.%s could not be sent: %w", what.mesh, what.method, err)
			if perr := rt.sendErrorToPort(port, err); perr != nil {
				lost(err)
			}
		}
	}
	return rt.send(t.ref, t.reg, m, args, port, failed)
}

// sendOpen opens a port of this proc for h, which waits for the members'
// procs, and sends the call with it as the reply port. A queued call
// that cannot be sent fails h.
func (rt *core) sendOpen(t meshTarget, m *method, args callArgs, h portHandler) error {
	id, err := rt.ports.open(h, t.ref.sendProcs(t.reg))
	if err != nil {
		return err
	}
	failed := func() func(error) {
		return func(err error) {
			rt.ports.close(id)
			h.fail(err)
		}
	}
	if err := rt.send(t.ref, t.reg, m, args, portRef{proc: rt.procID, id: id}, failed); err != nil {
		rt.ports.close(id)
		return err
	}
	return nil
}

func streamAdverb[R any](t meshTarget, b binding, args callArgs) *ReplyStream[R] {
	rt, m, what, err := prepare(t, b)
	failed := func(err error) *ReplyStream[R] {
		s := &ReplyStream[R]{ch: make(chan streamItem[R], 1), n: 1, what: what}
		s.ch <- streamItem[R]{err: err}
		return s
	}
	if err != nil {
		return failed(err)
	}
	missing := t.ref.missingIn(t.reg) // skipped
	n := t.reg.numRanks() - len(missing)
	s := &ReplyStream[R]{ch: make(chan streamItem[R], n), n: n, what: what}
	if n == 0 {
		return s
	}
	if err := rt.sendOpen(t, m, args, &streamPort[R]{s: s, left: n, skip: missing}); err != nil {
		return failed(err)
	}
	return s
}

// chooseAdverb calls one member of the region picked at random, never a
// missing one.
func chooseAdverb[R any](t meshTarget, b binding, args callArgs) *Future[R] {
	if t.err == nil {
		t.reg = t.reg.single(pickPresent(t))
	}
	return callOneAdverb[R](t, b, args)
}

// pickPresent picks a rank of t's region at random among its members
// not missing; with every member missing, any (CallOne then says so).
func pickPresent(t meshTarget) int {
	n := t.reg.numRanks()
	var missing []missingMember
	if t.ref != nil {
		missing = t.ref.missingIn(t.reg)
	}
	if len(missing) == 0 || len(missing) == n {
		return rand.IntN(n)
	}
	k := rand.IntN(n - len(missing)) // the k-th present rank
	for _, mm := range missing {     // in rank order
		if mm.rank > k {
			break
		}
		k++
	}
	return k
}
