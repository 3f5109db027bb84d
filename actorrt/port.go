package actorrt

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// A port is an address messages can be sent to: a proc and a number on it.
// Every reply in the runtime travels to a port: Call opens one that
// gathers a reply per member, CallOne one that takes a single reply, a
// channel (OpenChannel) one that queues whatever comes. The receiving side
// of a port is a portHandler.
type portHandler interface {
	// deliver takes one message for the port, on the dispatcher goroutine,
	// in arrival order. It returns false once the port wants no more.
	deliver(f *wire.Frame) bool
	// fail ends the port with err (shutdown, lost proc, lost bus). It may be
	// called after the port is done; it must then do nothing.
	fail(err error)
}

// portTable holds the open ports of this proc. Port ids are handed out in
// order and never reused, so the ids ever opened are those up to next,
// and the fixed ones opened with openAt.
type portTable struct {
	mu    sync.Mutex
	next  uint64
	fixed []uint64 // ids opened with openAt
	m     map[uint64]portEntry
	err   error // once set (the proc is shutting down), open fails at once
}

type portEntry struct {
	h     portHandler
	waits []string // procs whose replies the port waits for: it fails if one dies
}

func (t *portTable) open(h portHandler, waits []string) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, t.err
	}
	if t.m == nil {
		t.m = map[uint64]portEntry{}
	}
	t.next++
	t.m[t.next] = portEntry{h, waits}
	return t.next, nil
}

// openAt opens a port at a fixed id, known to its senders in advance.
func (t *portTable) openAt(id uint64, h portHandler, waits []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]portEntry{}
	}
	t.m[id] = portEntry{h, waits}
	t.fixed = append(t.fixed, id)
}

// wasOpened reports whether id was ever opened here.
func (t *portTable) wasOpened(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return id != 0 && id <= t.next || slices.Contains(t.fixed, id)
}

func (t *portTable) get(id uint64) portHandler {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id].h
}

func (t *portTable) close(id uint64) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// failAll ends every open port with err, and every later open.
func (t *portTable) failAll(err error) {
	t.mu.Lock()
	es := t.m
	t.m = nil
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
	for _, e := range es {
		e.h.fail(err)
	}
}

// failWaiting ends every port that waits for a reply from proc.
func (t *portTable) failWaiting(proc string, err error) {
	var hs []portHandler
	t.mu.Lock()
	for id, e := range t.m {
		if slices.Contains(e.waits, proc) {
			hs = append(hs, e.h)
			delete(t.m, id)
		}
	}
	t.mu.Unlock()
	for _, h := range hs {
		h.fail(err)
	}
}

// Sentinels travel by their text so that errors.Is works after the trip.
var (
	sentinelList = []error{ErrNotStarted, ErrBadExtent, ErrOutOfRange, ErrNotRegistered, ErrBadEndpoint,
		ErrBadArgs, ErrNotOne, ErrNameTaken, ErrDecode, ErrPanic, ErrStopped, ErrActorFailed, ErrProcFailed,
		ErrTooLarge, ErrNoHostsConfig, ErrBus}
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

// decodeReply decodes a reply value into v, or returns the error the reply
// carries.
func decodeReply[T any](f *wire.Frame, v *T) error {
	if f.Flags&wire.FlagError != 0 {
		return replyError(f)
	}
	if _, void := any(v).(*Void); void {
		return nil
	}
	if err := wire.DecodePayload(f.Payload, []reflect.Type{reflect.TypeFor[T]()}, func(d *msgpack.Decoder) error { return d.Decode(v) }); err != nil {
		return fmt.Errorf("%w: reply: %v", ErrDecode, err)
	}
	return nil
}

// Void is the result type of endpoints that return only an error.
type Void struct{}

// callPort gathers one reply per member of a region into a ValueMesh.
type callPort[R any] struct {
	fut  *Future[ValueMesh[R]]
	ext  Extent
	vals []R
	got  []bool
	left int
}

func newCallPort[R any](fut *Future[ValueMesh[R]], ext Extent) *callPort[R] {
	n := ext.NumRanks()
	return &callPort[R]{fut: fut, ext: ext, vals: make([]R, n), got: make([]bool, n), left: n}
}

func (p *callPort[R]) deliver(f *wire.Frame) bool {
	r := f.Rank
	if r < 0 || r >= len(p.vals) {
		p.fail(fmt.Errorf("%w: reply for rank %d of %v", ErrDecode, r, p.ext))
		return false
	}
	if p.got[r] {
		return true // a second answer from one member: the first stands
	}
	if err := decodeReply(f, &p.vals[r]); err != nil {
		p.fail(err)
		return false
	}
	p.got[r] = true
	p.left--
	if p.left > 0 {
		return true
	}
	p.fut.resolve(ValueMesh[R]{ext: p.ext, vals: p.vals}, nil)
	return false
}

func (p *callPort[R]) fail(err error) { p.fut.resolve(ValueMesh[R]{}, err) }

// onePort takes a single reply.
type onePort[R any] struct{ fut *Future[R] }

func (p *onePort[R]) deliver(f *wire.Frame) bool {
	var v R
	err := decodeReply(f, &v)
	p.fut.resolve(v, err)
	return false
}

func (p *onePort[R]) fail(err error) { p.fut.resolve(*new(R), err) }

// streamPort passes each reply on as it comes.
type streamPort[R any] struct {
	mu   sync.Mutex
	s    *ReplyStream[R]
	left int
}

func (p *streamPort[R]) deliver(f *wire.Frame) bool {
	var v R
	err := decodeReply(f, &v)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 {
		return false
	}
	p.s.ch <- streamItem[R]{v, err} // buffered for every reply: never blocks
	p.left--
	return p.left > 0
}

func (p *streamPort[R]) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ; p.left > 0; p.left-- {
		p.s.ch <- streamItem[R]{err: err}
	}
}
