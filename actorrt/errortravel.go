package actorrt

import (
	"errors"
	"fmt"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Sentinels travel by their text so that errors.Is works after the trip.
var (
	// ErrMissing comes before ErrActorFailed, which a missing member's
	// error wraps too: the first one matched travels.
	sentinelList = []error{ErrMissing, ErrNotStarted, ErrBadExtent, ErrOutOfRange, ErrNotRegistered, ErrBadEndpoint,
		ErrBadArgs, ErrNotOne, ErrNameTaken, ErrDecode, ErrPanic, ErrStopped, ErrActorFailed, ErrProcFailed,
		ErrTooLarge, ErrNoHostsConfig, ErrBus, ErrMailboxFull,
		ErrNotFound, ErrWrongType, ErrNotFailed}
	sentinels = map[string]error{}
)

func init() {
	for _, e := range sentinelList {
		sentinels[e.Error()] = e
	}
}

// sentinelOf is the text of the first sentinel err matches, or "".
func sentinelOf(err error) string {
	for _, s := range sentinelList {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return ""
}

// wireError is an error as it travels in a port message. A sender
// without this package's types writes a wire.ErrorReply, which reads as
// one: the same fields, without the actor's.
type wireError struct {
	Sentinel string      `msgpack:"s"` // name of a sentinel of this package, for errors.Is after the trip
	Actor    *ActorError `msgpack:"a"`
	Message  string      `msgpack:"m"`
}

func toWireError(err error) wireError {
	var ae *ActorError
	if errors.As(err, &ae) {
		return wireError{Actor: ae}
	}
	return wireError{Message: err.Error(), Sentinel: sentinelOf(err)}
}

func (we wireError) toError() error {
	if we.Actor != nil {
		return we.Actor
	}
	if s := sentinels[we.Sentinel]; s != nil {
		return &remoteError{msg: we.Message, sentinel: s}
	}
	return errors.New(we.Message)
}

// remoteError is a runtime error raised in another proc; it keeps its
// sentinel for errors.Is.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// replyError decodes the error payload of a port message.
func replyError(f *wire.Frame) error {
	var we wireError
	if err := wire.DecodePayload(f.Payload, nil, func(d *msgpack.Decoder) error { return d.Decode(&we) }); err != nil {
		return fmt.Errorf("%w: error reply: %v", ErrDecode, err)
	}
	return we.toError()
}
