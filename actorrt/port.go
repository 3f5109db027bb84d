package actorrt

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"sync"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Port is an address values of type T can be sent to, from any proc of the
// job: a port of a channel (OpenChannel), or the reply port an
// explicit-response endpoint receives. A Port is a small value: copy it,
// keep it, pass it as an endpoint argument to another proc and Send from
// there. The zero Port goes nowhere: Send on it does nothing.
type Port[T any] struct {
	rt  *core // the runtime that sends from here
	ref portRef
}

// portRef is a port's address. rank is what the sender reports as its
// place (a member's message rank, for replies); once marks the reply port
// of an explicit-response endpoint.
type portRef struct {
	proc string
	id   uint64
	rank int
	once bool
}

func (r portRef) zero() bool { return r.id == 0 }

// Send delivers v to the port. It does not wait for the receiver. It fails
// at once if the port's proc is known to be gone or the receiver known to
// be closed (learned from an earlier send); otherwise a value that cannot
// be delivered is reported back to this proc, and later sends fail.
func (p Port[T]) Send(v T) error {
	if p.ref.zero() {
		return nil
	}
	if p.rt == nil {
		return ErrNotStarted
	}
	prepareWire(reflect.TypeFor[T]())
	return p.rt.sendToPort(p.ref, 0, func(e *msgpack.Encoder) error { return wire.EncodeArg(e, v) })
}

// String prints the port's address.
func (p Port[T]) String() string { return fmt.Sprintf("Port(%s#%d)", p.ref.proc, p.ref.id) }

// encodeWire and decodeWire make a Port an endpoint argument.
func (p Port[T]) encodeWire(e *msgpack.Encoder) error {
	return e.EncodeMulti(p.ref.proc, p.ref.id, p.ref.rank, p.ref.once)
}

func (p *Port[T]) decodeWire(d *msgpack.Decoder) error {
	rt, err := decodingRuntime(d)
	if err != nil {
		return err
	}
	p.rt = rt
	return d.DecodeMulti(&p.ref.proc, &p.ref.id, &p.ref.rank, &p.ref.once)
}

// portElem marks Port types for Register: an endpoint whose first argument
// is a Port is an explicit-response endpoint.
func (Port[T]) portElem() reflect.Type { return reflect.TypeFor[T]() }

func (p *Port[T]) setRef(rt *core, r portRef) { p.rt, p.ref = rt, r }

type portType interface{ portElem() reflect.Type }

type portSetter interface{ setRef(*core, portRef) }

var portIface = reflect.TypeFor[portType]()

// OpenChannel opens a channel in the runtime ctx belongs to (Main's
// function's ctx, or an endpoint's *Context): values sent to the Port,
// from any proc, are received in arrival order from the PortReceiver.
// Values from one sender arrive in the order sent.
func OpenChannel[T any](ctx context.Context) (Port[T], *PortReceiver[T]) {
	prepareWire(reflect.TypeFor[Port[T]]())
	r := &PortReceiver[T]{}
	rt, err := runtimeOf(ctx)
	if err != nil {
		r.err = err
		return Port[T]{}, r
	}
	id, err := rt.ports.open(r, nil)
	if err != nil {
		r.err = err
		return Port[T]{}, r
	}
	r.rt, r.id = rt, id
	return Port[T]{rt: rt, ref: portRef{proc: rt.procID, id: id, rank: -1}}, r
}

// PortReceiver is the receiving end of a channel. It is safe for use from
// many goroutines.
type PortReceiver[T any] struct {
	rt *core
	id uint64

	mu      sync.Mutex
	queue   []streamItem[T] // arrived, not yet received
	waiters []*Future[T]    // Recv calls waiting, in call order
	err     error           // set once closed: Recv returns it
}

// Recv returns a future for the next value. Futures of successive Recv
// calls get successive values.
func (r *PortReceiver[T]) Recv() *Future[T] {
	f := newFuture[T](label{mesh: "channel receive"})
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case len(r.queue) > 0:
		it := r.queue[0]
		r.queue = r.queue[1:]
		f.resolve(it.v, it.err)
	case r.err != nil:
		f.resolve(*new(T), r.err)
	default:
		r.waiters = append(r.waiters, f)
	}
	return f
}

// All yields values as they arrive until ctx ends (it then yields ctx's
// error once) or the receiver is closed.
func (r *PortReceiver[T]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			v, err := r.Recv().Get(ctx)
			if err != nil && r.closedErr() == err {
				return
			}
			if !yield(v, err) || ctx.Err() != nil {
				return
			}
		}
	}
}

func (r *PortReceiver[T]) closedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close closes the channel: waiting and later Recv calls fail with
// ErrStopped, and senders learn that the port is gone. Idempotent.
func (r *PortReceiver[T]) Close() {
	if r.rt != nil {
		r.rt.ports.close(r.id)
	}
	r.fail(fmt.Errorf("%w: channel closed", ErrStopped))
}

func (r *PortReceiver[T]) deliver(rt *core, f *wire.Frame) bool {
	var v T
	err := decodeReply(rt, f, &v)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return false
	}
	if len(r.waiters) > 0 {
		w := r.waiters[0]
		r.waiters = r.waiters[1:]
		w.resolve(v, err)
	} else {
		r.queue = append(r.queue, streamItem[T]{v: v, err: err})
	}
	return true
}

func (r *PortReceiver[T]) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.err = err
	for _, w := range r.waiters {
		w.resolve(*new(T), err)
	}
	r.waiters = nil
}
