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
// to, in rank order. A member missing from a mesh that goes on without it
// (SpawnOptions.GoOnWithout) has no value: Missing lists those, Has tells
// one, and At fails for it with ErrMissing.
type ValueMesh[T any] struct {
	ext     Extent
	vals    []T
	missing []bool // by rank; nil: none
}

// Extent is the shape of the mesh the values came from.
func (v ValueMesh[T]) Extent() Extent { return v.ext }

// Values returns the values in rank order, one per point of the extent,
// with the zero value of T at a missing member's rank (see Missing). The
// slice is the mesh's own; do not modify it.
func (v ValueMesh[T]) Values() []T { return v.vals }

// Len is the number of values, missing members' zero values included:
// the extent's number of points.
func (v ValueMesh[T]) Len() int { return len(v.vals) }

// At returns the value at point p of the extent; for a missing member, an
// error wrapping ErrMissing.
func (v ValueMesh[T]) At(p Point) (T, error) {
	var zero T
	if !p.ext.Equal(v.ext) {
		return zero, fmt.Errorf("%w: point %v is not of extent %v", ErrOutOfRange, p, v.ext)
	}
	if !v.Has(p) {
		return zero, fmt.Errorf("%w: no value at %v", ErrMissing, p)
	}
	return v.vals[p.Rank()], nil
}

// Has reports whether there is a value at point p of the extent: false
// for a missing member, or a point of another extent.
func (v ValueMesh[T]) Has(p Point) bool {
	if !p.ext.Equal(v.ext) {
		return false
	}
	return v.missing == nil || !v.missing[p.Rank()]
}

// Missing lists the points of the members that were missing, in rank
// order; nil when none was.
func (v ValueMesh[T]) Missing() []Point {
	var out []Point
	for r, m := range v.missing {
		if m {
			out = append(out, v.ext.point(r))
		}
	}
	return out
}

// Items iterates over (point, value) in rank order, skipping missing
// members.
func (v ValueMesh[T]) Items() iter.Seq2[Point, T] {
	return func(yield func(Point, T) bool) {
		for r, x := range v.vals {
			if v.missing != nil && v.missing[r] {
				continue
			}
			if !yield(v.ext.point(r), x) {
				return
			}
		}
	}
}

// String prints the extent and the values, "missing" for a missing
// member: on one line when they are short, one per line with their points
// otherwise.
func (v ValueMesh[T]) String() string {
	strs := make([]string, len(v.vals))
	short := true
	for i, x := range v.vals {
		if v.missing != nil && v.missing[i] {
			strs[i] = "missing"
			continue
		}
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
// [values...]], and with missing members as [extent, [values...],
// [missing ranks, ascending]]; the zero ValueMesh as nil. T must travel
// too: Register checks it.

// encodeWire sends the extent, the values and the missing members' ranks.
func (v ValueMesh[T]) encodeWire(e *msgpack.Encoder) error {
	if v.vals == nil && len(v.ext.dims) == 0 {
		return e.EncodeNil()
	}
	if len(v.vals) != v.ext.NumRanks() || (v.missing != nil && len(v.missing) != len(v.vals)) {
		return fmt.Errorf("actorrt: a ValueMesh of %d values for extent %v cannot be sent", len(v.vals), v.ext)
	}
	var missing []int
	for r, m := range v.missing {
		if m {
			missing = append(missing, r)
		}
	}
	n := 2
	if missing != nil {
		n = 3
	}
	if err := e.EncodeArrayLen(n); err != nil {
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
	if missing == nil {
		return nil
	}
	if err := e.EncodeArrayLen(len(missing)); err != nil {
		return err
	}
	for _, r := range missing {
		if err := e.EncodeInt(int64(r)); err != nil {
			return err
		}
	}
	return nil
}

// decodeWire reads a ValueMesh sent by encodeWire: one value per
// point of its extent, then the missing ranks, if any: ascending, each
// once, within the extent.
func (v *ValueMesh[T]) decodeWire(d *msgpack.Decoder) error {
	parts, err := d.DecodeArrayLen()
	switch {
	case err != nil:
		return err
	case parts == -1:
		*v = ValueMesh[T]{}
		return nil
	case parts != 2 && parts != 3:
		return fmt.Errorf("%w: ValueMesh of %d values, want 2 or 3", ErrDecode, parts)
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
	var missing []bool
	if parts == 3 {
		if missing, err = decodeMissing(d, n); err != nil {
			return err
		}
		for r, m := range missing {
			if m {
				vals[r] = *new(T)
			}
		}
	}
	*v = ValueMesh[T]{ext: ext, vals: vals, missing: missing}
	return nil
}

// decodeMissing reads the missing ranks of a ValueMesh of n values: at
// least one, ascending, each below n.
func decodeMissing(d *msgpack.Decoder, n int) ([]bool, error) {
	k, err := d.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if k < 1 || k > n {
		return nil, fmt.Errorf("%w: ValueMesh of %d values with %d missing", ErrDecode, n, k)
	}
	missing := make([]bool, n)
	last := -1
	for range k {
		r, err := d.DecodeInt()
		if err != nil {
			return nil, err
		}
		if r <= last || r >= n {
			return nil, fmt.Errorf("%w: ValueMesh missing rank %d (after %d, of %d values)", ErrDecode, r, last, n)
		}
		missing[r], last = true, r
	}
	return missing, nil
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
	v       T
	err     error
	missing bool // a missing member's answer: skipped
}

// All yields each member's reply as (value, nil), or (zero, err) for a
// member that failed, in arrival order, until every member has answered.
// A member missing from a mesh that goes on without it (GoOnWithout) is
// skipped: nothing is yielded for it. If ctx ends first, it yields (zero,
// ctx's error) once and stops.
func (s *ReplyStream[T]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for i := 0; i < s.n; i++ {
			select {
			case it := <-s.ch:
				if it.missing {
					continue
				}
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
