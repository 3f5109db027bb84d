package actorrt

import (
	"context"
	"fmt"
)

// Accumulate folds the replies of s, a Stream call, into one value as
// they arrive (Monarch's Accumulator): it starts from identity and calls
// combine(acc, reply) for each member's reply in arrival order, in the
// calling goroutine, one at a time, so combine needs no locking and the
// fold never waits for the slowest member before combining the others.
//
//	total, err := actorrt.Accumulate(ctx, getValue.Stream(counters), 0,
//		func(sum, v int) int { return sum + v })
//
// It returns the fold of every member's reply, or stops at the first error
// and returns it with the fold of the replies combined before it: a
// member's error (an *ActorError, or the error of a member whose proc
// failed), or ctx's end (wrapping ctx.Err(), with how many replies had
// come). The members still running are not interrupted: their replies,
// when they come, are dropped (the stream has room for every reply, so
// nothing waits on them), and the call's port closes once the last one
// arrives or its proc is gone. A stream is read once: Accumulate consumes
// it, as All does. A member missing from a mesh that goes on without it
// (SpawnOptions.GoOnWithout) is skipped: combine never sees it, and it
// is no error.
func Accumulate[T, R any](ctx context.Context, s *ReplyStream[T], identity R, combine func(acc R, reply T) R) (R, error) {
	switch {
	case s == nil:
		return identity, fmt.Errorf("%w: Accumulate of a nil stream (make one with an endpoint's Stream)", ErrBadArgs)
	case combine == nil:
		return identity, fmt.Errorf("%w: Accumulate of %s with a nil combine function", ErrBadArgs, s.what)
	}
	acc := identity
	for v, err := range s.All(ctx) {
		if err != nil {
			return acc, err
		}
		acc = combine(acc, v)
	}
	return acc, nil
}
