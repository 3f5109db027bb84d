package jobctl

import "errors"

var (
	// ErrNotServing: nothing serves the socket (no such file, or nobody
	// listens): the job has ended, or its client has not started it yet.
	ErrNotServing = errors.New("jobctl: no control socket served")
	// ErrRefused: the peer is another user's process.
	ErrRefused = errors.New("jobctl: refused")
	// ErrTooLarge: a request or an answer passed its bound.
	ErrTooLarge = errors.New("jobctl: message too large")
)
