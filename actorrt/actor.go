package actorrt

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"strconv"
	"sync"

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

	mu    sync.Mutex
	queue []envelope
	spare []envelope // the drained batch's array, reused
	wake  chan struct{}
	done  chan struct{}

	failed error // set when Init failed: later messages get this error
}

// envelope is one message in a mailbox.
type envelope struct {
	init    bool // Init, with the spawn request's arguments
	method  string
	payload []byte
	reply   portRef // where the result goes; zero: nobody waits for it
	view    *region
	msgIdx  int
}

func newActor(lm *localMesh, baseRank int) *actor {
	ctx, cancel := context.WithCancel(lm.rt.ctx)
	val := reflect.New(lm.typ.typ)
	return &actor{
		id:       lm.name + "[" + strconv.Itoa(baseRank) + "]",
		baseRank: baseRank,
		rank:     lm.base.point(baseRank),
		mesh:     lm,
		val:      val,
		ptr:      val.Interface(),
		ctx:      ctx,
		cancel:   cancel,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// enqueue adds a message; it never blocks (the mailbox is unbounded, so the
// dispatcher is never held up by a busy actor).
func (a *actor) enqueue(e envelope) {
	a.mu.Lock()
	a.queue = append(a.queue, e)
	first := len(a.queue) == 1
	a.mu.Unlock()
	if first {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

func (a *actor) run() {
	defer close(a.done)
	for {
		select {
		case <-a.wake:
		case <-a.ctx.Done():
			a.refuseQueued()
			return
		}
		a.mu.Lock()
		batch := a.queue
		a.queue = a.spare[:0]
		a.mu.Unlock()
		for i := range batch {
			if a.ctx.Err() != nil {
				a.refuse(batch[i:])
				return
			}
			a.handle(&batch[i])
			batch[i] = envelope{}
		}
		a.spare = batch[:0]
	}
}

// stop ends the actor; messages still queued are refused with ErrStopped,
// and ports it still owes an answer get ErrStopped too.
func (a *actor) stop() {
	a.cancel()
	a.mesh.rt.failOwed(a, fmt.Errorf("%w: actor %s stopped before it answered", ErrStopped, a.id))
}

func (a *actor) refuseQueued() {
	a.mu.Lock()
	q := a.queue
	a.queue = nil
	a.mu.Unlock()
	a.refuse(q)
}

func (a *actor) refuse(q []envelope) {
	for i := range q {
		if !q[i].reply.zero() {
			a.replyError(&q[i], fmt.Errorf("%w: actor %s", ErrStopped, a.id))
		}
	}
}

func (a *actor) handle(e *envelope) {
	if e.init {
		a.handleInit(e)
		return
	}
	if a.failed != nil {
		a.replyError(e, a.failed)
		return
	}
	m := a.mesh.typ.endpoints[e.method]
	if m == nil {
		a.replyError(e, a.errorf(e.method, CodeNoSuch, "%s has no endpoint %s", a.mesh.typ.name, e.method))
		return
	}
	ctx := &Context{Context: a.ctx, actor: a, view: e.view, msgIdx: e.msgIdx, reply: e.reply}
	out, aerr := a.invoke(m, ctx, e.payload)
	if aerr != nil {
		switch {
		case m.port != nil && !e.reply.zero():
			// The port is owed an answer: the error is the answer, unless the
			// endpoint already sent one.
			owed := e.reply
			owed.once = true
			if a.mesh.rt.answered(owed) {
				a.replyError(e, aerr)
			}
		case !e.reply.zero():
			a.replyError(e, aerr)
		default:
			a.mesh.rt.log.Error().Err(aerr).Msg("endpoint failed and no caller waits for its reply")
		}
		return
	}
	if e.reply.zero() || m.port != nil {
		return // nobody waits, or the endpoint answers on its port itself
	}
	err := a.mesh.rt.sendToPort(e.reply, 0, func(enc *msgpack.Encoder) error {
		if m.result == nil {
			return enc.EncodeNil()
		}
		return enc.EncodeValue(out[0])
	})
	if err != nil {
		a.replyError(e, a.errorf(m.name, CodeError, "reply: %v", err))
	}
}

func (a *actor) handleInit(e *envelope) {
	var err error
	if m := a.mesh.typ.init; m != nil {
		ctx := &Context{Context: a.ctx, actor: a, msgIdx: a.baseRank}
		if _, aerr := a.invoke(m, ctx, e.payload); aerr != nil {
			err = aerr
		}
	}
	if err != nil {
		a.failed = fmt.Errorf("%w: actor %s failed in Init: %v", ErrStopped, a.id, err)
		a.replyError(e, err)
		return
	}
	a.mesh.rt.sendToPort(e.reply, 0, func(enc *msgpack.Encoder) error { return enc.EncodeNil() })
}

// invoke decodes the arguments and calls the method, turning an error
// result, a decode failure or a panic into an *ActorError.
func (a *actor) invoke(m *method, ctx *Context, payload []byte) (out []reflect.Value, aerr *ActorError) {
	defer func() {
		if r := recover(); r != nil {
			aerr = a.errorf(m.name, CodePanic, "%v", r)
			aerr.Stack = string(debug.Stack())
		}
	}()
	if m.void0 != nil && len(payload) == 1 && payload[0] == 0x90 { // no arguments
		if err := m.void0(a.ptr, ctx); err != nil {
			return nil, a.errorf(m.name, CodeError, "%v", err)
		}
		return nil, nil
	}
	lead := 2
	if m.port != nil {
		lead = 3
	}
	in := make([]reflect.Value, lead+len(m.args))
	in[0], in[1] = a.val, reflect.ValueOf(ctx)
	if err := decodeArgs(payload, m.args, in[lead:]); err != nil {
		return nil, a.errorf(m.name, CodeDecode, "%v", err)
	}
	if m.port != nil {
		in[2] = a.explicitPort(m, ctx.reply)
	}
	out = m.fn.Call(in)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return nil, a.errorf(m.name, CodeError, "%v", err)
	}
	return out, nil
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

// explicitPort makes the Port[R] an explicit-response endpoint answers on:
// the caller's reply port, marked once, and owed an answer until it gets
// one (or the actor stops, which answers it with ErrStopped).
func (a *actor) explicitPort(m *method, reply portRef) reflect.Value {
	pv := reflect.New(m.port)
	if !reply.zero() {
		reply.once = true
		a.mesh.rt.owe(reply, a)
		pv.Interface().(portSetter).setRef(reply)
	}
	return pv.Elem()
}

// decodeArgs decodes an argument array into values of the given types.
func decodeArgs(p []byte, types []reflect.Type, into []reflect.Value) error {
	return decodePayload(p, func(d *msgpack.Decoder) error {
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
