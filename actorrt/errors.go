package actorrt

import (
	"errors"
	"fmt"

	"github.com/monarch-go/monarch/internal/wire"
)

// The sentinels a host agent also sends (ErrDecode, ErrStopped,
// ErrProcFailed, ErrTooLarge) are the wire layer's: one value on both
// sides, under names of this package.
var (
	errDecode     = wire.ErrDecode
	errStopped    = wire.ErrStopped
	errProcFailed = wire.ErrProcFailed
	errTooLarge   = wire.ErrTooLarge
)

var (
	// ErrNotStarted: the runtime is used before Main started it, or from
	// a context that carries none (Main's function's ctx, an endpoint's
	// *Context and contexts derived from them carry their runtime).
	ErrNotStarted = errors.New("actorrt: not started (call actorrt.Main first, and pass on the ctx it gives)")
	// ErrBadExtent: dimensions with an empty or repeated name, or a size < 1.
	ErrBadExtent = errors.New("actorrt: bad extent")
	// ErrOutOfRange: a slice, index or rank outside a mesh.
	ErrOutOfRange = errors.New("actorrt: out of range")
	// ErrNotRegistered: an actor type that was not registered (or whose
	// registration failed) is spawned or called.
	ErrNotRegistered = errors.New("actorrt: actor type not registered")
	// ErrBadEndpoint: a method the runtime cannot serve, refused at Register,
	// or a function given to an adverb that is not an endpoint of the mesh's
	// actor type (or to Init1, Init2 or Init3 that is not its Init).
	ErrBadEndpoint = errors.New("actorrt: bad endpoint")
	// ErrBadArgs: Spawn arguments that do not match the actor's Init.
	ErrBadArgs = errors.New("actorrt: bad arguments")
	// ErrNotOne: CallOne on a mesh that does not hold exactly one actor.
	ErrNotOne = errors.New("actorrt: CallOne needs a mesh of exactly one actor")
	// ErrNameTaken: Spawn with a name already used by a live mesh on one of
	// the procs.
	ErrNameTaken = errors.New("actorrt: name already used")
	// ErrDecode: a message or argument that could not be decoded.
	ErrDecode = errDecode
	// ErrPanic: an endpoint panicked.
	ErrPanic = errors.New("actorrt: endpoint panicked")
	// ErrStopped: the mesh, actor or proc is stopped, or the runtime shut
	// down, before the message could be handled.
	ErrStopped = errStopped
	// ErrActorFailed: the actor failed (an error nobody received, a
	// failure it did not supervise, or its proc ended) and answers no more.
	ErrActorFailed = errors.New("actorrt: actor failed")
	// ErrProcFailed: a proc exited or was lost.
	ErrProcFailed = errProcFailed
	// ErrNoHostsConfig: HostsFromConfig found neither a hosts file nor host
	// agents started by a launcher.
	ErrNoHostsConfig = errors.New("actorrt: no hosts configured")
	// ErrTooLarge: a message (call arguments, a reply, a value sent to a
	// port) that would pass the largest message (WithMaxMessage). It
	// is refused before it is copied.
	ErrTooLarge = errTooLarge
	// ErrMailboxFull: an actor's mailbox is at its bound (WithMailboxLimit):
	// a call is refused with it; a message nobody waits for fails the
	// actor instead, so that its loss is reported to the owner. A call
	// queued behind a restart that would pass the same bound, in its
	// sender's queue for that mesh, is refused with it by its adverb.
	ErrMailboxFull = errors.New("actorrt: mailbox full")
	// ErrBus: the bus connection was lost or dropped messages.
	ErrBus = errors.New("actorrt: bus fault")
	// ErrNotFailed: ActorMesh.Restart of a mesh (or slice) none of whose
	// members has failed.
	ErrNotFailed = errors.New("actorrt: not failed")
	// ErrNotFound: Lookup of a name no live mesh of the job has.
	ErrNotFound = errors.New("actorrt: no mesh of that name")
	// ErrWrongType: Lookup or GetOrSpawn of a name that a mesh of another
	// actor type holds.
	ErrWrongType = errors.New("actorrt: the name is a mesh of another type")
	// ErrMissing: a member of a mesh spawned to go on without members
	// that cannot be restarted (SpawnOptions.GoOnWithout) is missing: the
	// adverbs skip it, a ValueMesh marks it, and CallOne to it fails with
	// it, naming the member and why.
	ErrMissing = errors.New("actorrt: member missing")
)

// Codes of ActorError.Code.
const (
	CodeError  = "error"  // the endpoint returned an error
	CodePanic  = "panic"  // the endpoint panicked
	CodeDecode = "decode" // the arguments could not be decoded
	CodeNoSuch = "nosuch" // no such endpoint on the actor
)

// ActorError is an error raised by an actor while handling a message,
// delivered to the caller. errors.Is matches ErrPanic and ErrDecode by Code.
type ActorError struct {
	ActorID  string // the failing actor, as mesh[rank]
	Proc     string // the proc it ran on
	Endpoint string // the endpoint (method name)
	Code     string // CodeError, CodePanic, CodeDecode or CodeNoSuch
	Message  string // the error's text, or the panic value
	Stack    string // the goroutine stack at a panic; empty otherwise
	// Sentinel is the text of the sentinel of this package (ErrStopped,
	// ...) that the endpoint's error wrapped, if any: errors.Is still finds
	// it once the error has reached the caller.
	Sentinel string
}

func (e *ActorError) Error() string {
	return fmt.Sprintf("actor %s (proc %s) %s: %s: %s", e.ActorID, e.Proc, e.Endpoint, codeWord(e.Code), e.Message)
}

func codeWord(code string) string {
	switch code {
	case CodePanic:
		return "panic"
	case CodeDecode:
		return "cannot decode arguments"
	case CodeNoSuch:
		return "no such endpoint"
	}
	return "error"
}

// Is matches the sentinel of the error's code, and the one the endpoint's
// error wrapped.
func (e *ActorError) Is(target error) bool {
	if e.Sentinel != "" && sentinels[e.Sentinel] == target {
		return true
	}
	switch e.Code {
	case CodePanic:
		return target == ErrPanic
	case CodeDecode:
		return target == ErrDecode
	case CodeNoSuch:
		return target == ErrBadEndpoint
	}
	return false
}

// ExitError, returned by the function Main runs, makes the program exit
// with Code; Err, if any, is printed first. Failure, if set, is what the
// client reports failed (see Failure); without it, a non-zero Code is
// reported as Err, or as the status alone.
type ExitError struct {
	Code    int
	Err     error
	Failure *Failure
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }
