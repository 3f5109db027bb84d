package actorrt

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Future is a result that arrives later. Get waits for it; Done can be
// used in a select. A Future is safe for use from many goroutines, and
// every Get returns the same value and error.
type Future[T any] struct {
	done chan struct{}
	once sync.Once
	val  T
	err  error
	what label // what is awaited, for errors: counters.GetValue
}

// label names what a future or stream waits for. Its parts are joined only
// when an error needs them: building the string on every call was a
// measurable share of a Broadcast.
type label struct{ mesh, method string }

func (l label) String() string {
	if l.method == "" {
		return l.mesh
	}
	return l.mesh + "." + l.method
}

func newFuture[T any](what label) *Future[T] {
	return &Future[T]{done: make(chan struct{}), what: what}
}

// failedFuture is a Future that already holds err.
func failedFuture[T any](what label, err error) *Future[T] {
	f := newFuture[T](what)
	f.resolve(*new(T), err)
	return f
}

// resolve sets the result once; later calls are ignored.
func (f *Future[T]) resolve(v T, err error) {
	f.once.Do(func() {
		f.val, f.err = v, err
		close(f.done)
	})
}

// Done is closed once the result is in.
func (f *Future[T]) Done() <-chan struct{} { return f.done }

// Get waits for the result, or for ctx to end.
func (f *Future[T]) Get(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.val, f.err
	default:
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("actorrt: waiting for %s: %w", f.what, ctx.Err())
	}
}

// ValueMesh holds one value per member of the mesh (or slice) a call went
// to, in rank order.
type ValueMesh[T any] struct {
	ext  Extent
	vals []T
}

// Extent is the shape of the mesh the values came from.
func (v ValueMesh[T]) Extent() Extent { return v.ext }

// Values returns the values in rank order. The slice is the mesh's own;
// do not modify it.
func (v ValueMesh[T]) Values() []T { return v.vals }

// Len is the number of values.
func (v ValueMesh[T]) Len() int { return len(v.vals) }

// At returns the value at point p of the extent.
func (v ValueMesh[T]) At(p Point) (T, error) {
	if !p.ext.Equal(v.ext) {
		var zero T
		return zero, fmt.Errorf("%w: point %v is not of extent %v", ErrOutOfRange, p, v.ext)
	}
	return v.vals[p.Rank()], nil
}

// Items iterates over (point, value) in rank order.
func (v ValueMesh[T]) Items() iter.Seq2[Point, T] {
	return func(yield func(Point, T) bool) {
		for r, x := range v.vals {
			if !yield(v.ext.point(r), x) {
				return
			}
		}
	}
}

// String prints the extent and the values: on one line when they are
// short, one per line with their points otherwise.
func (v ValueMesh[T]) String() string {
	strs := make([]string, len(v.vals))
	short := true
	for i, x := range v.vals {
		strs[i] = fmt.Sprint(x)
		if len(strs[i]) > 16 || strings.ContainsAny(strs[i], " \n") {
			short = false
		}
	}
	if short {
		return fmt.Sprintf("ValueMesh%v [%s]", v.ext, strings.Join(strs, " "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ValueMesh%v:", v.ext)
	for r, s := range strs {
		fmt.Fprintf(&b, "\n  %v: %s", v.ext.point(r), s)
	}
	return b.String()
}

// A ValueMesh travels as an endpoint argument or result, as [extent,
// [values...]]; the zero ValueMesh as nil. T must travel too: Register
// checks it.

// encodeWire sends the extent and the values.
func (v ValueMesh[T]) encodeWire(e *msgpack.Encoder) error {
	if v.vals == nil && len(v.ext.dims) == 0 {
		return e.EncodeNil()
	}
	if len(v.vals) != v.ext.NumRanks() {
		return fmt.Errorf("actorrt: a ValueMesh of %d values for extent %v cannot be sent", len(v.vals), v.ext)
	}
	if err := e.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := v.ext.encodeWire(e); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(v.vals)); err != nil {
		return err
	}
	for i := range v.vals {
		if err := e.Encode(&v.vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// decodeWire reads a ValueMesh sent by encodeWire: one value per
// point of its extent.
func (v *ValueMesh[T]) decodeWire(d *msgpack.Decoder) error {
	if ok, err := decodeTuple(d, "ValueMesh", 2); !ok {
		*v = ValueMesh[T]{}
		return err
	}
	var ext Extent
	if err := ext.decodeWire(d); err != nil {
		return err
	}
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != ext.NumRanks() {
		return fmt.Errorf("%w: ValueMesh of %d values for extent %v", ErrDecode, n, ext)
	}
	vals := make([]T, 0, min(n, 1024)) // grown as read: n comes from the peer
	for i := 0; i < n; i++ {
		var x T
		if err := d.Decode(&x); err != nil {
			return err
		}
		vals = append(vals, x)
	}
	*v = ValueMesh[T]{ext: ext, vals: vals}
	return nil
}

// valueElem tells Register what a ValueMesh[T] carries.
func (ValueMesh[T]) valueElem() reflect.Type { return reflect.TypeFor[T]() }

// ReplyStream yields the replies of a Stream call as they arrive.
type ReplyStream[T any] struct {
	ch   chan streamItem[T]
	n    int // replies expected
	what label
}

type streamItem[T any] struct {
	v   T
	err error
}

// All yields each member's reply as (value, nil), or (zero, err) for a
// member that failed, in arrival order, until every member has answered.
// If ctx ends first, it yields (zero, ctx's error) once and stops.
func (s *ReplyStream[T]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for i := 0; i < s.n; i++ {
			select {
			case it := <-s.ch:
				if !yield(it.v, it.err) {
					return
				}
			case <-ctx.Done():
				var zero T
				yield(zero, fmt.Errorf("actorrt: streaming %s: %d of %d replies: %w", s.what, i, s.n, ctx.Err()))
				return
			}
		}
	}
}
