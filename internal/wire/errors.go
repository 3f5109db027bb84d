package wire

import "errors"

// Errors that cross process boundaries. Errors travel by their text (an
// error reply names its sentinel), so a receiver can match them with
// errors.Is after the trip; these texts are the job's, shared by the SDK
// (package actorrt exports the same values) and the host agent, and must
// not change.
var (
	// ErrDecode: a message or argument that could not be decoded.
	ErrDecode = errors.New("actorrt: cannot decode")
	// ErrTooLarge: a message that would pass the largest message.
	ErrTooLarge = errors.New("actorrt: message too large")
	// ErrProcFailed: a proc exited or was lost.
	ErrProcFailed = errors.New("actorrt: proc failed")
	// ErrStopped: the target was stopped before the message could be
	// handled.
	ErrStopped = errors.New("actorrt: stopped")
)

var sentinels = []error{ErrDecode, ErrTooLarge, ErrProcFailed, ErrStopped}

// ErrorReply is the payload of a FlagError frame as a sender without the
// SDK's error types writes it: the text of the sentinel the error wraps
// (one of this package's, or "") and the error's message. The SDK reads
// it as one of its own error replies, which use the same field names.
type ErrorReply struct {
	Sentinel string `msgpack:"s"`
	Message  string `msgpack:"m"`
}

// NewErrorReply is err as an error reply: its text, and the first of this
// package's sentinels it matches.
func NewErrorReply(err error) ErrorReply {
	r := ErrorReply{Message: err.Error()}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			r.Sentinel = s.Error()
			break
		}
	}
	return r
}
