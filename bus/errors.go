package bus

import "errors"

var (
	// ErrClosed is returned by Run and Publish once the connection is gone,
	// whether closed by Close or lost.
	ErrClosed = errors.New("bus: connection closed")
	// ErrSlowConsumer reports that messages were dropped because the
	// receiving queue was full. It goes to ConnOptions.OnError.
	ErrSlowConsumer = errors.New("bus: slow consumer, messages were dropped")
	// ErrTooLarge is returned by Publish for a message over the connection's
	// MaxMessage.
	ErrTooLarge = errors.New("bus: message too large")
	// ErrNotSent is returned by Publish while a connection that reconnects
	// is down and its buffer for what waits to go out is full: the message
	// was not sent (a sender that keeps what it sends can send it again).
	ErrNotSent = errors.New("bus: link down and its send buffer full: not sent")
	// ErrMalformed reports a received message that was dropped because it
	// could not be read (see DropKind). It reaches ConnOptions.OnError as a
	// *DropError, once per kind; Conn.Dropped counts every one.
	ErrMalformed = errors.New("bus: malformed message dropped")
)
