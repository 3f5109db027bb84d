package actorrt

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// The end of an actor. An actor's optional Cleanup(ctx *Context, cause
// error) error runs once, on a goroutine of its own, after the actor's
// last message, whatever stopped it: its mesh stopped, it failed, it
// stopped itself (Context.Stop), its proc is ending. Its bound is the
// cleanup timeout; a Cleanup still running then is abandoned (its
// goroutine is left to finish, or to die with the proc) and logged, and
// the stop goes on.

// DefaultCleanupTimeout bounds an actor's Cleanup unless
// WithCleanupTimeout says otherwise: below the default stop timeout (5s),
// after which a proc being stopped is killed.
const DefaultCleanupTimeout = 3 * time.Second

// WithCleanupTimeout bounds how long an actor's Cleanup may run (and, at
// a proc's end, how long the proc waits for the message an actor is still
// handling before its Cleanup). A Cleanup that has not returned by then is
// abandoned and a line in the system log (and on stderr) names the actor
// and the bound. Default DefaultCleanupTimeout (3s). Keep it below the
// stop timeout (WithStopTimeout, 5s): a proc that a stop asked to exit is
// killed after that, its cleanups with it.
func WithCleanupTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("actorrt: cleanup timeout %v must be positive", d)
		}
		o.cleanupTimeout = d
		return nil
	}
}

// ending is where an actor stands in its end.
type ending struct {
	// state moves once from cleanupPending: to cleanupRunning and then
	// cleanupOver, or straight to cleanupOver. Whoever moves it to
	// cleanupOver closes over and logs why, if there is anything to say.
	state atomic.Int32
	over  chan struct{}
	// cause is why the actor ended, as Cleanup gets it; set before the
	// actor's context is cancelled.
	cause atomic.Pointer[error]
	// ready: Init succeeded (the actor's goroutine only). An actor that
	// never started has nothing to clean up.
	ready bool
	// stopAsked: Context.Stop was called.
	stopAsked atomic.Bool
}

const (
	cleanupPending int32 = iota
	cleanupRunning
	cleanupOver
)

// settle moves the state from from to cleanupOver and closes over; it
// reports whether this call did.
func (e *ending) settle(from int32) bool {
	if !e.state.CompareAndSwap(from, cleanupOver) {
		return false
	}
	close(e.over)
	return true
}

// Stop stops this actor (the one member running the endpoint, not the
// rest of its mesh) once the current message returns. Messages queued
// behind it are refused with ErrStopped, and so is every later call,
// naming the actor; then its Cleanup, if it has one, runs. It is a clean
// stop: the actor's owner is not told of a failure. The meshes the actor
// owns stop with it. Called from a goroutine the actor started, outside
// any message, it stops the actor after the message in hand, or at once
// if it is idle. Stop does not block; calling it again does nothing.
func (c *Context) Stop() {
	a := c.actor
	if a == nil || a.end.stopAsked.Swap(true) {
		return
	}
	a.box.signal() // an idle actor wakes to stop
}

// stopIfAsked stops the actor if Context.Stop was called. The actor's
// goroutine calls it between messages.
func (a *actor) stopIfAsked() {
	if a.end.stopAsked.Load() && a.deadErr() == nil {
		err := fmt.Errorf("%w: actor %s stopped itself (Context.Stop)", ErrStopped, a.id)
		a.stopAs(err, err)
	}
}

// awaitCleanup waits until the actor's end is over or expired is closed;
// then a Cleanup still running, or still to start because a message did
// not return, is abandoned and logged.
func (a *actor) awaitCleanup(expired <-chan struct{}) {
	if !a.mesh.typ.cleanup.IsValid() {
		return // nothing to wait for
	}
	select {
	case <-a.end.over:
		return
	case <-expired:
	}
	bound := a.mesh.rt.opts.cleanupTimeout
	switch {
	case a.end.settle(cleanupPending):
		a.mesh.rt.log.Warn().Str("actor", a.id).Dur("bound", bound).
			Msgf("actor %s: still handling a message %v after it was stopped; its Cleanup will not run (WithCleanupTimeout)", a.id, bound)
	case a.end.settle(cleanupRunning):
		a.abandoned(bound)
	}
}

func (a *actor) abandoned(bound time.Duration) {
	a.mesh.rt.log.Warn().Str("actor", a.id).Dur("bound", bound).
		Msgf("actor %s: Cleanup did not return within %v (WithCleanupTimeout); abandoned, the stop goes on", a.id, bound)
}

// runCleanup runs the actor's Cleanup, if it has one and Init succeeded,
// and returns once it has returned or the cleanup timeout has passed. The
// actor's goroutine calls it once, after its last message.
func (a *actor) runCleanup() {
	fn := a.mesh.typ.cleanup
	if !fn.IsValid() || !a.end.ready {
		a.end.settle(cleanupPending)
		return
	}
	if !a.end.state.CompareAndSwap(cleanupPending, cleanupRunning) {
		return // abandoned before it could start
	}
	rt := a.mesh.rt
	cause := rt.endCause("ended")
	if p := a.end.cause.Load(); p != nil {
		cause = *p
	}
	bound := rt.opts.cleanupTimeout
	a.awaitGoroutines(bound)
	// The actor's own context is done by now: Cleanup gets one that is
	// not, until the bound.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), bound)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				rt.log.Error().Str("actor", a.id).Interface("panic", r).Str("stack", string(debug.Stack())).
					Msgf("actor %s: Cleanup panicked: %v", a.id, r)
			}
		}()
		ctx := &Context{Context: cctx, actor: a, msgIdx: a.baseRank}
		out := fn.Call([]reflect.Value{a.val, reflect.ValueOf(ctx), reflect.ValueOf(&cause).Elem()})
		if err, _ := out[0].Interface().(error); err != nil {
			rt.log.Warn().Str("actor", a.id).Err(err).Msgf("actor %s: Cleanup: %v", a.id, err)
		}
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-returned:
		a.end.settle(cleanupRunning)
	case <-t.C:
		if a.end.settle(cleanupRunning) {
			a.abandoned(bound)
		}
	}
}

// endCause is why this process's actors end when the process does: the
// job's stop notice, if one came, or an ErrStopped saying what happened
// to the proc ("is shutting down", say).
func (rt *core) endCause(happened string) error {
	rt.ending.mu.Lock()
	defer rt.ending.mu.Unlock()
	for _, n := range rt.ending.seen {
		if n.Stop {
			return &n
		}
	}
	return fmt.Errorf("%w: proc %s %s", ErrStopped, rt.procID, happened)
}

// awaitGoroutines waits until the actor's concurrent calls and ctx.Go
// functions have returned (their context is done: they should be quick),
// or bound has passed; Cleanup then sees the state they left.
func (a *actor) awaitGoroutines(bound time.Duration) {
	expired := time.NewTimer(bound)
	defer expired.Stop()
	done := make(chan struct{})
	go func() {
		a.goroutines.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-expired.C:
		a.mesh.rt.log.Warn().Str("actor", a.id).Dur("bound", bound).
			Msgf("actor %s: concurrent calls or ctx.Go functions still running %v after it ended; its Cleanup runs beside them", a.id, bound)
	}
}
