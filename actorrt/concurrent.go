package actorrt

import (
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultConcurrency is how many calls of a concurrent endpoint run at
// once in one actor when Concurrent gives no bound.
const DefaultConcurrency = 64

// RegisterOption changes how Register serves some of a type's endpoints.
// Make one with Concurrent or ConcurrentLimit; the zero value is refused.
type RegisterOption struct {
	apply func(at *actorType) error
}

// Concurrent makes an endpoint concurrent, with at most
// DefaultConcurrency calls running at once in each actor. The endpoint is
// given as a method expression of the registered type, as to the binders:
//
//	actorrt.Register[Generator](actorrt.Concurrent((*Generator).Generate))
//
// Each call of a concurrent endpoint runs in a goroutine of its own, with
// a Context of its own; calls start in the order they arrive. The actor's
// other endpoints keep their one-at-a-time rule, and may run while
// concurrent calls do: state that both touch needs a lock. See the
// package documentation ("Concurrent endpoints") for the exact ordering.
func Concurrent(endpoint any) RegisterOption {
	return ConcurrentLimit(endpoint, DefaultConcurrency)
}

// ConcurrentLimit is Concurrent with a bound of its own: at most limit
// calls of the endpoint run at once in each actor (limit >= 1; each
// concurrent endpoint has its own bound). When the bound is reached, the
// actor's mailbox waits for a call to end before it starts the next
// message, of either kind, so that messages keep their order.
func ConcurrentLimit(endpoint any, limit int) RegisterOption {
	return RegisterOption{apply: func(at *actorType) error {
		if endpoint != nil && reflect.TypeOf(endpoint).Kind() != reflect.Func {
			return fmt.Errorf("Concurrent takes a method expression such as (*%s).Method, not a %T", at.typ.Name(), endpoint)
		}
		m, err := endpointOf(endpoint, at)
		if err != nil {
			return fmt.Errorf("Concurrent: %s", strings.TrimPrefix(err.Error(), ErrBadEndpoint.Error()+": "))
		}
		if limit < 1 {
			return fmt.Errorf("Concurrent %s: bound %d; the bound is at least 1", m.name, limit)
		}
		if m.limit != 0 {
			return fmt.Errorf("Concurrent %s: given twice", m.name)
		}
		m.limit = limit
		return nil
	}}
}

// applyOptions applies Register's options to a type not registered yet;
// it reports every bad option at once.
func applyOptions(at *actorType, opts []RegisterOption) error {
	var problems []string
	for i, o := range opts {
		if o.apply == nil {
			problems = append(problems, fmt.Sprintf("option %d is a zero RegisterOption (make one with actorrt.Concurrent)", i+1))
			continue
		}
		if err := o.apply(at); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) == 0 {
		return nil
	}
	for _, m := range at.endpoints {
		m.limit = 0 // the type is not registered: leave nothing half done
	}
	return fmt.Errorf("%w: Register[%s]: %s", ErrBadEndpoint, at.typ, strings.Join(problems, "; "))
}

// slots counts one concurrent endpoint's calls running in one actor.
// Only the mailbox adds; a call that ends takes itself off and says so
// on freed.
type slots struct {
	running atomic.Int32
	freed   chan struct{}
}

// startConcurrent starts a call of a concurrent endpoint in a goroutine
// of its own, once the endpoint's bound allows. It runs in the mailbox,
// so that calls start in the order they arrived, and it waits (for a call
// to end, or the actor to stop) while the bound is reached.
func (a *actor) startConcurrent(m *method, e *envelope) {
	s := a.slots[m]
	if s == nil {
		if a.slots == nil {
			a.slots = map[*method]*slots{}
		}
		s = &slots{freed: make(chan struct{}, 1)}
		a.slots[m] = s
	}
	for s.running.Load() >= int32(m.limit) {
		select {
		case <-s.freed:
		case <-a.ctx.Done():
			a.refuse([]envelope{*e})
			return
		}
	}
	s.running.Add(1)
	ctx := &Context{Context: a.ctx, actor: a, view: e.view, msgIdx: e.msgIdx, reply: e.reply, method: m}
	ev := *e // the mailbox reuses e's slot
	start := monoNow()
	// Listed before the mailbox goes on: what it runs next finds it.
	call := a.calls.add(m, start)
	a.goroutines.Add(1)
	go func() {
		defer a.goroutines.Done()
		defer func() {
			a.calls.remove(call)
			s.running.Add(-1)
			select {
			case s.freed <- struct{}{}:
			default:
			}
		}()
		a.label(m.name) // the goroutine ends with the call: nothing to undo
		if !feedOn {
			a.call(m, ctx, &ev)
			return
		}
		failed := a.call(m, ctx, &ev)
		a.countShared(m.stat, start, failed)
	}()
}

// concurrentCalls lists an actor's concurrent calls running now, for
// `monarch stacks` (inspect.go), which lists them beside the call its
// mailbox runs. A call takes a slot and gives it back when it ends; a
// slot given back is taken again first, so the list grows only to the
// most calls that ran at once.
type concurrentCalls struct {
	mu    sync.Mutex
	slots []callNow // a free slot has a nil method
	free  []int
}

// callNow is a call running: its endpoint, since when (monoNow).
type callNow struct {
	method *method
	since  int64
}

// add lists a call of m started at since; it returns its slot.
func (c *concurrentCalls) add(m *method, since int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.free); n > 0 {
		i := c.free[n-1]
		c.free = c.free[:n-1]
		c.slots[i] = callNow{m, since}
		return i
	}
	c.slots = append(c.slots, callNow{m, since})
	return len(c.slots) - 1
}

// remove takes the call in slot i off the list.
func (c *concurrentCalls) remove(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slots[i] = callNow{}
	c.free = append(c.free, i)
}

// appendRunning appends the calls running to dst.
func (c *concurrentCalls) appendRunning(dst []callNow) []callNow {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, call := range c.slots {
		if call.method != nil {
			dst = append(dst, call)
		}
	}
	return dst
}

// Go runs fn in a goroutine of its own, tied to the actor. fn gets a
// Context of its own, valid until fn returns, whose context is done when
// the actor stops (or fails); the actor's Cleanup (and the new instance of
// a restart) waits for fn to return, within the cleanup timeout.
//
// An error fn returns, or a panic in it, is reported as one of an
// endpoint that nobody receives: the actor fails and its owner gets a
// *MeshFailure whose Err is an *ActorError (Endpoint: the endpoint that
// called Go, followed by " (ctx.Go)"; a panic's stack). Called from an
// endpoint that answers on a Port (PortMethod), an error or panic while
// that port still waits for its answer is also sent to the port, so that
// the caller gets the *ActorError. The proc lives on either way: a
// goroutine started with a go statement instead would end the proc when
// it panics.
//
// Go may be called from any endpoint, from Init and Supervise, and from
// another Go's function. A nil fn fails the actor, as an error would.
func (c *Context) Go(fn func(ctx *Context) error) {
	a := c.actor
	name := "ctx.Go"
	var reply portRef
	if m := c.method; m != nil {
		name = m.name + " (ctx.Go)"
		if m.port != nil {
			reply = c.reply // read now: the mailbox reuses c
		}
	}
	gctx := &Context{Context: a.ctx, actor: a, view: c.view, msgIdx: c.msgIdx, method: c.method}
	a.goroutines.Add(1)
	go func() {
		defer a.goroutines.Done()
		a.label(name)
		aerr := a.runGo(name, gctx, fn)
		if aerr == nil {
			return
		}
		rt := a.mesh.rt
		if !reply.zero() && rt.health.answered(ownedOnce(reply)) {
			rt.sendErrorToPort(reply, aerr)
		}
		a.fail(fmt.Sprintf("%s %s: %s", name, codeWord(aerr.Code), aerr.Message), aerr)
	}()
}

// runGo calls Go's function, turning its error or panic into an
// *ActorError.
func (a *actor) runGo(name string, ctx *Context, fn func(*Context) error) (aerr *ActorError) {
	defer func() {
		if r := recover(); r != nil {
			aerr = a.errorf(name, CodePanic, "%v", r)
			aerr.Stack = string(debug.Stack())
		}
	}()
	if fn == nil {
		return a.errorf(name, CodeError, "ctx.Go was given a nil function")
	}
	if err := fn(ctx); err != nil {
		return a.endpointError(name, err)
	}
	return nil
}
