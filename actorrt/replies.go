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

// decodeReply decodes a reply value into v, or returns the error the reply
// carries; references in it bind to rt, which received it.
func decodeReply[T any](rt *core, f *wire.Frame, v *T) error {
	if f.Flags&wire.FlagError != 0 {
		return replyError(f)
	}
	if _, void := any(v).(*Void); void || readPlainReply(f.Payload, v) {
		return nil
	}
	prepareWire(reflect.TypeFor[T]())
	// A reply belongs to its port alone: a large numeric block refers to it.
	if err := wire.DecodeSharedFor(rt, f.Payload, []reflect.Type{reflect.TypeFor[T]()}, func(d *msgpack.Decoder) error { return d.Decode(v) }); err != nil {
		return fmt.Errorf("%w: reply: %v", ErrDecode, err)
	}
	return nil
}

// Void is the result type of endpoints that return only an error.
type Void struct{}

// callPort gathers one reply per member of a region into a ValueMesh. A
// member that answers ErrMissing, or that its sender knows is missing
// (skip), is marked missing there.
type callPort[R any] struct {
	fut     *Future[ValueMesh[R]]
	ext     Extent
	vals    []R
	got     []bool
	missing []bool // nil: none
	left    int
}

func newCallPort[R any](fut *Future[ValueMesh[R]], ext Extent) *callPort[R] {
	n := ext.NumRanks()
	return &callPort[R]{fut: fut, ext: ext, vals: make([]R, n), got: make([]bool, n), left: n}
}

func (p *callPort[R]) deliver(rt *core, f *wire.Frame) bool {
	r := f.Rank
	if r < 0 || r >= len(p.vals) {
		p.fail(fmt.Errorf("%w: reply for rank %d of %v", ErrDecode, r, p.ext))
		return false
	}
	if p.got[r] {
		return true // a second answer from one member: the first stands
	}
	if err := decodeReply(rt, f, &p.vals[r]); err != nil {
		if !errors.Is(err, ErrMissing) {
			p.fail(err)
			return false
		}
		p.markMissing(r)
	}
	return p.count(r)
}

// skip marks the missing members the sender knows of, by rank in the
// region; it reports whether none is left to answer (the future is
// resolved then).
func (p *callPort[R]) skip(missing []missingMember) bool {
	for _, mm := range missing {
		if p.got[mm.rank] {
			continue // marked already
		}
		p.markMissing(mm.rank)
		if !p.count(mm.rank) {
			return true
		}
	}
	return false
}

func (p *callPort[R]) skipMissing(missing []missingMember) bool { return p.skip(missing) }

func (p *callPort[R]) markMissing(r int) {
	if p.missing == nil {
		p.missing = make([]bool, len(p.vals))
	}
	p.missing[r] = true
	p.vals[r] = *new(R)
}

// count records rank r's answer; false once every member answered (the
// future is resolved then).
func (p *callPort[R]) count(r int) bool {
	p.got[r] = true
	p.left--
	if p.left > 0 {
		return true
	}
	p.fut.resolve(ValueMesh[R]{ext: p.ext, vals: p.vals, missing: p.missing}, nil)
	return false
}

func (p *callPort[R]) fail(err error) { p.fut.resolve(ValueMesh[R]{}, err) }

// onePort takes a single reply.
type onePort[R any] struct{ fut *Future[R] }

func (p *onePort[R]) deliver(rt *core, f *wire.Frame) bool {
	var v R
	err := decodeReply(rt, f, &v)
	p.fut.resolve(v, err)
	return false
}

func (p *onePort[R]) fail(err error) { p.fut.resolve(*new(R), err) }

// streamPort passes each reply on as it comes. The members its sender
// knew to be missing (skip, by rank in the region) were not counted: an
// answer of theirs is dropped.
type streamPort[R any] struct {
	mu   sync.Mutex
	s    *ReplyStream[R]
	left int
	skip []missingMember
}

func (p *streamPort[R]) deliver(rt *core, f *wire.Frame) bool {
	for _, mm := range p.skip {
		if mm.rank == f.Rank {
			return true
		}
	}
	var v R
	err := decodeReply(rt, f, &v)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 {
		return false
	}
	// A member missing is skipped: its item is not yielded.
	p.s.ch <- streamItem[R]{v: v, err: err, missing: errors.Is(err, ErrMissing)} // buffered for every reply: never blocks
	p.left--
	return p.left > 0
}

// skipMissing drops members learned missing after the stream was made:
// each takes one of its places, as an item All skips.
func (p *streamPort[R]) skipMissing(missing []missingMember) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, mm := range missing {
		if p.left == 0 || slices.ContainsFunc(p.skip, func(k missingMember) bool { return k.rank == mm.rank }) {
			continue
		}
		p.skip = append(p.skip, mm)
		p.s.ch <- streamItem[R]{missing: true}
		p.left--
	}
	return p.left == 0
}

func (p *streamPort[R]) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ; p.left > 0; p.left-- {
		p.s.ch <- streamItem[R]{err: err}
	}
}
