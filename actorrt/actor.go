package actorrt

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// actor is one running actor: a value of its type and a mailbox served by
// one goroutine, so that it handles one message at a time, in arrival
// order. Actors of one proc run concurrently.
type actor struct {
	id       string
	baseRank int
	rank     Point
	mesh     *localMesh
	val      reflect.Value // *T
	ptr      any           // the same *T, for calls without reflection
	ctx      context.Context
	cancel   context.CancelFunc

	box  mailbox       // its messages (mailbox.go)
	done chan struct{} // closed when its goroutine ends

	failed error // set when Init failed: later messages get this error
	// msgCtx is the Context of every endpoint call, reused: only its
	// message's fields change, so that a context derived from it (which
	// reads only the actor's) stays valid. last is the endpoint called
	// last, to skip the lookup for a run of calls to one endpoint.
	msgCtx Context
	last   *method
	// slots counts the running calls of each concurrent endpoint
	// (concurrent.go); the mailbox's alone. calls lists them, with their
	// start, for `monarch stacks`.
	slots map[*method]*slots
	calls concurrentCalls
	// dead is set once the actor failed or stopped: the dispatcher then
	// answers its messages with this error instead of queueing them.
	dead atomic.Pointer[error]
	end  ending // its Cleanup and Context.Stop (cleanup.go)

	// The instance it replaces, or that replaces it, in a restart in
	// place.
	restartHandOff
	// goroutines counts its concurrent calls and ctx.Go functions
	// running: Cleanup waits for them.
	goroutines sync.WaitGroup
	// running is the endpoint its mailbox runs now (nil: none), since
	// when (monoNow): two stores around each call, read by `monarch
	// stacks` (inspect.go).
	running atomic.Pointer[method]
	since   atomic.Int64
	// stats count the messages it handled, by endpoint (and Supervise),
	// with their handler times and errors, for the job state feed
	// (feedcount.go): its mesh's, kept by base rank, so that they outlive
	// a restart in place. Nil with the feed off.
	stats []endpointStats
	// labels caches, per endpoint name, the pprof labels of its calls
	// while a CPU profile runs (profile.go).
	labels sync.Map
}

// restartHandOff links the instances of a member of a mesh with a restart
// policy across a restart in place (localMesh.standIn, localActors.restart).
// The stand-in of a failed member holds the messages sent to it until
// its owner's order comes (hold); prev is the failed instance it
// replaces, next (on the failed one) the stand-in: the one-way messages
// left in prev's mailbox go to next's, after what was handed over before
// (mailbox.handOver), and next's Init waits for prev's end.
type restartHandOff struct {
	hold      chan restartOrder // nil: not a stand-in
	released  bool              // the order was sent; under mesh.mu
	givenUp   bool              // that order was to fail (it may not have yet); under mesh.mu
	standsFor string            // the reason of the failure it stands in for
	prev      *actor
	next      *actor
}

// held says a stand-in still waits for its order. Hold mesh.mu.
func (h *restartHandOff) held() bool { return h.hold != nil && !h.released }

// order gives a stand-in its order, once. Hold mesh.mu.
func (h *restartHandOff) order(o restartOrder) {
	h.released, h.givenUp = true, o.giveUp != nil
	h.hold <- o
}

// restartOrder is what a stand-in waits for: the Init of its restart, or
// the failure its owner gave up on.
type restartOrder struct {
	init   envelope
	giveUp error
}

// envelope is one message in a mailbox.
type envelope struct {
	init    bool // Init, with the spawn request's arguments
	restart bool // the Init of a restart in place
	manual  bool // ... by hand (ActorMesh.Restart), whose caller hears of its failure
	// sole: payload goes to this actor alone, so a large []byte argument
	// may share it instead of being copied.
	sole    bool
	failure *MeshFailure // a failure of a mesh this actor owns, for Supervise
	method  string
	payload []byte
	reply   portRef // where the result goes; zero: nobody waits for it
	view    *region
	msgIdx  int
}

func newActor(lm *localMesh, baseRank int) *actor {
	val := reflect.New(lm.typ.typ)
	a := &actor{
		id:       lm.name + "[" + strconv.Itoa(baseRank) + "]",
		baseRank: baseRank,
		rank:     lm.base.point(baseRank),
		mesh:     lm,
		val:      val,
		ptr:      val.Interface(),
		done:     make(chan struct{}),
		end:      ending{over: make(chan struct{})},
		stats:    lm.stats[baseRank],
	}
	a.box.setLimits(a.id, lm.rt.opts.mailbox)
	// The actor travels in its context: what it spawns with it (or with a
	// context derived from it) it owns.
	a.ctx, a.cancel = context.WithCancel(context.WithValue(lm.rt.ctx, actorKey{}, a))
	a.msgCtx = Context{Context: a.ctx, actor: a}
	return a
}

// enqueue adds a message to the mailbox (see mailbox.push).
func (a *actor) enqueue(e envelope) error { return a.box.push(e) }

// flushStaged queues what route staged, under one lock. An actor that has
// left refuses it instead: its calls get its error, its one-way messages
// go to its stand-in, if it has one.
func (a *actor) flushStaged() {
	if q := a.box.flush(); len(q) > 0 {
		a.refuse(q)
	}
}

func (a *actor) run() {
	defer close(a.done)
	defer a.runCleanup() // after the last message
	if a.hold != nil && !a.awaitRestart() {
		return
	}
	for {
		select {
		case <-a.box.wake:
			a.stopIfAsked() // Context.Stop from outside a message
		case <-a.ctx.Done():
			a.leave(nil)
			return
		}
		batch := a.box.take()
		for i := range batch {
			if a.ctx.Err() != nil {
				a.leave(batch[i:])
				return
			}
			a.handle(&batch[i])
			a.stopIfAsked()
			a.box.served(&batch[i])
		}
		a.box.recycle(batch)
	}
}

// awaitRestart is a stand-in's wait for its owner's order. On a restart
// it waits for the failed instance it replaces to be over (its last
// message, the hand-over of its one-way messages, its Cleanup, whose
// checkpoint Init may read back), at most the cleanup timeout and a
// second, then puts the Init first in its mailbox. It reports whether the
// stand-in goes on to serve.
func (a *actor) awaitRestart() bool {
	var o restartOrder
	select {
	case o = <-a.hold:
	case <-a.ctx.Done():
		a.leave(nil)
		return false
	}
	if o.giveUp != nil {
		a.stopAs(o.giveUp, nil)
		a.leave(nil)
		return false
	}
	if a.prev != nil {
		bound := a.mesh.rt.opts.cleanupTimeout + time.Second
		t := time.NewTimer(bound)
		select {
		case <-a.prev.done:
		case <-a.ctx.Done():
		case <-t.C:
			a.mesh.rt.log.Warn().Str("actor", a.id).Dur("bound", bound).
				Msgf("actor %s: its failed instance has not ended %v after its restart was ordered; the new one starts beside it", a.id, bound)
		}
		t.Stop()
		a.prev = nil
	}
	a.box.handOver([]envelope{o.init}, true)
	return true
}

// leave refuses what is left in the mailbox, q (the rest of a batch) and
// then the queue, as the actor ends: calls get its error, and one-way
// messages go to its stand-in, if it has one. What is routed to it after
// goes the same way (flushStaged).
func (a *actor) leave(q []envelope) { a.refuse(a.box.leave(q)) }

// stop ends the actor; messages still queued are refused with ErrStopped,
// and ports it still owes an answer get ErrStopped too. cause is why, as
// its Cleanup gets it; nil: the actor's mesh was stopped.
func (a *actor) stop(cause error) {
	a.stopAs(fmt.Errorf("%w: actor %s was stopped", ErrStopped, a.id), cause)
}

// stopAs ends the actor without a report to its owner: its later messages
// and the ports it owes an answer get err, and the meshes it owns stop;
// cause is what its Cleanup gets (nil: err). It reports whether this call
// ended it.
func (a *actor) stopAs(err, cause error) bool {
	if !a.dead.CompareAndSwap(nil, &err) {
		return false
	}
	a.ended(err, cause)
	return true
}

// ended is the rest of stopAs, once the actor is marked dead with err.
func (a *actor) ended(err, cause error) {
	if cause == nil {
		cause = err
	}
	a.end.cause.Store(&cause) // before cancel: the actor's goroutine reads it then
	a.cancel()
	a.mesh.rt.failOwed(a, err)
	a.mesh.rt.sup.ownerEnded(a)
}

// deadErr is why the actor no longer handles messages, or nil.
func (a *actor) deadErr() error {
	if p := a.dead.Load(); p != nil {
		return *p
	}
	return nil
}

// fail ends the actor because of reason (cause, if an endpoint's error or
// panic): it answers no more, the meshes it owns stop, and its owner gets
// a MeshFailure.
//
// In a mesh with a restart policy, a stand-in takes its place at once and
// keeps what is sent to the member until the owner's decision; what was
// in its mailbox, or owed an answer, fails now, with an error that says so.
func (a *actor) fail(reason string, cause *ActorError) {
	lm := a.mesh
	msg := reason
	if lm.restarts {
		msg += " (its mesh's restart policy restarts it in place unless past its limit)"
	}
	err := fmt.Errorf("%w: actor %s: %s", ErrActorFailed, a.id, msg)
	if lm.restarts {
		// A stand-in takes the member's place as it is marked dead, so
		// that every message is in its mailbox or the stand-in's.
		if !lm.standIn(a, &err, reason) {
			return
		}
	} else if !a.dead.CompareAndSwap(nil, &err) {
		return
	}
	rt := lm.rt
	mf := &MeshFailure{
		Mesh: lm.name, MeshID: lm.id, ActorID: a.id, Proc: rt.procID, Reason: reason,
		Dims: lm.base.dims, Coords: a.rank.coords, Base: a.baseRank, Err: cause,
	}
	// Cleanup's cause, with a copy of mf, which supervision has.
	own := *mf
	why := fmt.Errorf("%w: %w", ErrActorFailed, &own)
	a.end.cause.Store(&why)
	a.cancel()
	rt.failOwed(a, err)
	rt.sup.ownerEnded(a)
	rt.sup.memberFailed(mf, lm.owner)
}

func (a *actor) refuse(q []envelope) {
	err := a.deadErr()
	if err == nil {
		err = fmt.Errorf("%w: actor %s", ErrStopped, a.id)
	}
	// A failed member's stand-in takes the one-way messages: they were
	// sent to the member, not to a call that can be told it failed.
	var left []envelope
	for i := range q {
		switch {
		case !q[i].reply.zero():
			a.replyError(&q[i], err)
		case a.next != nil && !q[i].init && q[i].failure == nil:
			left = append(left, q[i])
		}
	}
	if len(left) > 0 {
		a.next.box.handOver(left, false)
	}
}

func (a *actor) handle(e *envelope) {
	if e.init {
		a.handleInit(e)
		return
	}
	if e.failure != nil {
		a.supervise(e.failure)
		return
	}
	if a.failed != nil {
		a.replyError(e, a.failed)
		return
	}
	m := a.last
	if m == nil || m.name != e.method {
		m = a.mesh.typ.endpoints[e.method]
		a.last = m
	}
	if m == nil {
		a.replyError(e, a.errorf(e.method, CodeNoSuch, "%s has no endpoint %s", a.mesh.typ.name, e.method))
		return
	}
	if m.limit > 0 {
		a.startConcurrent(m, e) // may wait for a slot
		return
	}
	ctx := &a.msgCtx
	ctx.view, ctx.msgIdx, ctx.reply, ctx.method = e.view, e.msgIdx, e.reply, m
	start := monoNow()
	a.since.Store(start)
	a.running.Store(m)
	labelled := a.label(m.name)
	failed := a.call(m, ctx, e)
	if labelled {
		unlabel()
	}
	a.running.Store(nil)
	if feedOn {
		a.count(m.stat, start, failed)
	}
}

// call runs endpoint m for message e and answers its caller; an error
// nobody receives fails the actor. It runs in the mailbox, or in a
// concurrent call's goroutine. It reports whether the endpoint failed
// (an error, a panic, arguments that did not decode).
func (a *actor) call(m *method, ctx *Context, e *envelope) (failed bool) {
	out, aerr := a.invoke(m, ctx, e.payload, e.sole)
	if aerr != nil && aerr.Code == CodeDecode {
		// A message whose arguments do not decode is malformed, not the
		// actor's failure: its caller, if it waits, hears why; otherwise
		// it is dropped and counted like any malformed message.
		// (An explicit-response endpoint was never handed its port.)
		if e.reply.zero() {
			a.mesh.rt.drop(wire.DropArgs, a.mesh.name, fmt.Errorf("actor %s, endpoint %s: %s", a.id, m.name, aerr.Message))
		} else {
			a.replyError(e, aerr)
		}
		return true
	}
	if aerr != nil {
		switch {
		case m.port != nil && !e.reply.zero():
			// The port is owed an answer: the error is the answer, unless the
			// endpoint already sent one.
			if a.mesh.rt.health.answered(ownedOnce(e.reply)) {
				a.replyError(e, aerr)
			}
		case !e.reply.zero():
			a.replyError(e, aerr)
			return true // the caller has the error; the actor lives on
		}
		// Nobody receives this error (a broadcast, or an explicit-response
		// endpoint that failed): the actor fails and its owner hears of it.
		a.fail(fmt.Sprintf("%s %s: %s", m.name, codeWord(aerr.Code), aerr.Message), aerr)
		return true
	}
	if e.reply.zero() || m.port != nil {
		return false // nobody waits, or the endpoint answers on its port itself
	}
	err := a.mesh.rt.sendToPort(e.reply, 0, func(enc *msgpack.Encoder) error {
		switch {
		case m.result == nil:
			return enc.EncodeNil()
		case m.result == bytesType:
			return wire.EncodeBytes(enc, out[0].Bytes())
		}
		return enc.EncodeValue(out[0])
	})
	if err != nil {
		a.replyError(e, a.errorf(m.name, CodeError, "reply: %v", err))
	}
	return false
}

func (a *actor) handleInit(e *envelope) {
	var err error
	if m := a.mesh.typ.init; m != nil {
		ctx := &Context{Context: a.ctx, actor: a, msgIdx: a.baseRank, method: m}
		a.since.Store(monoNow())
		a.running.Store(m)
		labelled := a.label(m.name)
		if _, aerr := a.invoke(m, ctx, e.payload, false); aerr != nil {
			err = aerr
		}
		if labelled {
			unlabel()
		}
		a.running.Store(nil)
	}
	if err != nil && e.restart {
		failed := fmt.Errorf("%w: actor %s failed in Init on its restart: %v", ErrActorFailed, a.id, err)
		var ended bool
		if a.mesh.restarts && !e.manual {
			ended = a.mesh.standIn(a, &failed, "failed in Init on its restart: "+err.Error())
		} else {
			ended = a.dead.CompareAndSwap(nil, &failed)
		}
		// Its owner hears of it in the answer, and decides again: only
		// once this instance counts as failed, or a restart the answer
		// leads to could find it running.
		a.replyError(e, err)
		if ended {
			a.ended(failed, nil)
		}
		return
	}
	if err != nil {
		a.failed = fmt.Errorf("%w: actor %s failed in Init: %v", ErrStopped, a.id, err)
		a.replyError(e, err)
		return
	}
	a.end.ready = true // Cleanup runs for an actor whose Init succeeded
	a.mesh.rt.sendToPort(e.reply, 0, func(enc *msgpack.Encoder) error { return enc.EncodeNil() })
}

// invoke decodes the arguments and calls the method, turning an error
// result, a decode failure or a panic into an *ActorError.
func (a *actor) invoke(m *method, ctx *Context, payload []byte, sole bool) (out []reflect.Value, aerr *ActorError) {
	defer func() {
		if r := recover(); r != nil {
			aerr = a.errorf(m.name, CodePanic, "%v", r)
			aerr.Stack = string(debug.Stack())
		}
	}()
	if m.void0 != nil && len(payload) == 1 && payload[0] == 0x90 { // no arguments
		if err := m.void0(a.ptr, ctx); err != nil {
			return nil, a.endpointError(m.name, err)
		}
		return nil, nil
	}
	if m.void1 != nil {
		if handled, err := m.void1(a.ptr, ctx, payload, sole); handled {
			if err != nil {
				return nil, a.endpointError(m.name, err)
			}
			return nil, nil
		}
	}
	lead := 2
	if m.port != nil {
		lead = 3
	}
	in := make([]reflect.Value, lead+len(m.args))
	in[0], in[1] = a.val, reflect.ValueOf(ctx)
	if m.readers == nil || !readPlainArgs(payload, sole, m.readers, in[lead:]) {
		if err := decodeArgs(a.mesh.rt, payload, sole, m.args, in[lead:]); err != nil {
			return nil, a.errorf(m.name, CodeDecode, "%v", err)
		}
	}
	if m.port != nil {
		in[2] = a.explicitPort(m, ctx.reply)
	}
	out = m.fn.Call(in)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return nil, a.endpointError(m.name, err)
	}
	return out, nil
}

// endpointError is the error an endpoint returned, as the caller gets it.
func (a *actor) endpointError(endpoint string, err error) *ActorError {
	ae := a.errorf(endpoint, CodeError, "%v", err)
	ae.Sentinel = sentinelOf(err)
	return ae
}

func (a *actor) errorf(endpoint, code, format string, args ...any) *ActorError {
	return &ActorError{ActorID: a.id, Proc: a.mesh.rt.procID, Endpoint: endpoint, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (a *actor) replyError(e *envelope, err error) {
	if e.reply.zero() {
		return
	}
	a.mesh.rt.sendErrorToPort(e.reply, err)
}

// supervise gives the owner actor a failure of a mesh it owns. Without a
// Supervise method, or when Supervise returns false or panics, the actor
// fails in turn.
func (a *actor) supervise(f *MeshFailure) {
	handled := false
	if sv := a.mesh.typ.supervise; sv.IsValid() {
		ctx := &Context{Context: a.ctx, actor: a, msgIdx: a.baseRank}
		start := monoNow()
		a.since.Store(start)
		a.running.Store(superviseMethod)
		defer a.running.Store(nil)
		if feedOn {
			defer func() { a.count(a.mesh.typ.superviseStat, start, !handled) }()
		}
		if a.label(superviseMethod.name) {
			defer unlabel()
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					a.mesh.rt.log.Error().Interface("panic", r).Str("actor", a.id).Msg("Supervise panicked")
					handled = false
				}
			}()
			handled = sv.Call([]reflect.Value{a.val, reflect.ValueOf(ctx), reflect.ValueOf(f)})[0].Bool()
		}()
	}
	switch {
	case !handled && f.GoesOn:
		// News of a mesh that goes on without a member, not an end.
		a.mesh.rt.log.Warn().Str("actor", a.id).Str("failure", f.Error()).Msg("a mesh goes on without a member")
	case !handled:
		a.fail("a mesh it owns failed and it did not handle it: "+f.Error(), nil)
	}
}

// ownedOnce is reply marked as a port answered once (an explicit-response
// endpoint's).
func ownedOnce(reply portRef) portRef {
	reply.once = true
	return reply
}

// explicitPort makes the Port[R] an explicit-response endpoint answers on:
// the caller's reply port, marked once, and owed an answer until it gets
// one (or the actor stops, which answers it with ErrStopped).
func (a *actor) explicitPort(m *method, reply portRef) reflect.Value {
	pv := reflect.New(m.port)
	if !reply.zero() {
		reply.once = true
		a.mesh.rt.health.owe(reply, a)
		pv.Interface().(portSetter).setRef(a.mesh.rt, reply)
	}
	return pv.Elem()
}

// decodeArgs decodes an argument array into values of the given types,
// the references among them bound to rt. With sole (p is this call's
// alone), a large numeric block refers to p (wire.DecodeSharedFor).
func decodeArgs(rt *core, p []byte, sole bool, types []reflect.Type, into []reflect.Value) error {
	decode := wire.DecodePayloadFor
	if sole {
		decode = wire.DecodeSharedFor
	}
	return decode(rt, p, types, func(d *msgpack.Decoder) error {
		n, err := d.DecodeArrayLen()
		if err != nil {
			return fmt.Errorf("argument list: %v", err)
		}
		if n < 0 {
			n = 0
		}
		if n != len(types) {
			return fmt.Errorf("got %d arguments, want %d", n, len(types))
		}
		for i, t := range types {
			v := reflect.New(t).Elem()
			if err := d.DecodeValue(v); err != nil {
				return fmt.Errorf("argument %d (%s): %v", i+1, t, err)
			}
			into[i] = v
		}
		return nil
	})
}
