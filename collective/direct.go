package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/monarch-go/monarch/ibverbs"
)

// The direct path: a round in which every member of the group writes a
// message (maybe empty) into its own slot at every other member, then
// reads the others' messages from its own memory (see the package doc,
// # How).

// ErrMismatch: the members of a group made different calls (another
// collective, op, root or length) at the same point.
var ErrMismatch = errors.New("collective: the members' calls differ")

// kinds of collective, in a call's tag.
const (
	kindAllReduce = 1 + iota
	kindReduceScatter
	kindAllGather
	kindBroadcast
)

// call is what a member calls, as its header says it to the others: the
// same on every member, or the collective fails with ErrMismatch.
type call struct {
	kind  int
	op    Op
	root  int
	bytes int // the data's length (all-gather: the part's)
}

func (c call) tag() uint64 {
	return uint64(c.kind) | uint64(c.op)<<8 | uint64(uint32(c.root))<<16
}

func callOf(bytes int, tag uint64) call {
	return call{kind: int(tag & 0xff), op: Op(tag >> 8 & 0xff), root: int(int32(uint32(tag >> 16))), bytes: bytes}
}

func (c call) String() string {
	what := ""
	switch c.kind {
	case kindAllReduce:
		what = "all-reduce (" + c.op.String() + ")"
	case kindReduceScatter:
		what = "reduce-scatter (" + c.op.String() + ")"
	case kindAllGather:
		what = "all-gather"
	case kindBroadcast:
		what = fmt.Sprintf("broadcast from index %d", c.root)
	default:
		what = fmt.Sprintf("collective %d", c.kind)
	}
	return fmt.Sprintf("%s of %d bytes", what, c.bytes)
}

// seqOff is where the word counting place s's direct messages lies in
// this member's buffer; slotOff where place s's slot of parity q starts.
func (g *group) seqOff(s int) int { return g.area + ctlBytes + 2*g.c.SlotBytes + 8*s }

func (g *group) slotOff(s, q int) int {
	return g.area + ctlBytes + 2*g.c.SlotBytes + seqBytes(g.size) + (2*s+q)*(hdrBytes+directBytes(g.c.SlotBytes))
}

// direct says whether a message of n bytes to each peer goes direct.
func (g *group) direct(n int) bool { return n <= directBytes(g.c.SlotBytes) }

// round is one round of the direct path for the call me: msg(p) is the
// message to the member at place p (nil: its header only), own what this
// member contributes to itself. Once every member's header is here and
// agrees with me, got(p, data) is called for every place in order (for
// this member's own place with own), data being p's message in this
// member's memory, valid until got returns. A header that disagrees
// fails the round with ErrMismatch, naming both calls, once every
// member's message is in: so every member of the group fails, and the
// group stays usable.
//
// Why two slots per sender are enough, with no acknowledgement: a member
// writes round k+1 only after it has read every member's round k
// message, which each sent only after it had read all of round k-1; so
// the slot of round k+1, that of k-1, is free.
func (g *group) round(ctx context.Context, me call, msg func(p int) []byte, own []byte, got func(p int, data []byte)) error {
	k := g.l.rounds[g.dim]
	q := int(k % 2)
	if len(g.l.stage) < g.size {
		g.l.stage = make([][]byte, g.size)
	}
	link := g.linkWord()
	sent := make(chan error, g.size)
	inflight := 0
	var serr error
	for p := range g.size {
		if p == g.me {
			continue
		}
		data := msg(p)
		m := append(g.l.stage[p][:0], make([]byte, hdrBytes)...)
		binary.LittleEndian.PutUint64(m[0:], uint64(me.bytes))
		binary.LittleEndian.PutUint64(m[8:], me.tag())
		binary.LittleEndian.PutUint64(m[16:], uint64(len(data)))
		binary.LittleEndian.PutUint64(m[24:], link)
		m = append(m, data...)
		g.l.stage[p] = m
		to := g.ranks[p]
		send := func() error {
			// The message, then the word that announces it.
			if err := g.c.Handles[to].WriteAdd(ctx, m, g.slotOff(g.me, q), g.seqOff(g.me), 1); err != nil {
				return g.peerErr("sending to", to, err)
			}
			return nil
		}
		// Through shared memory a send is a copy and an atomic: made
		// here. Over a network each peer's goes on its own, in parallel.
		if g.c.Handles[to].Backend() == "shm" {
			if err := send(); err != nil && serr == nil {
				serr = err
			}
			continue
		}
		inflight++
		go func() { sent <- send() }()
	}
	err := g.receive(ctx, me, k, q, own, got)
	for range inflight {
		if e := <-sent; e != nil && serr == nil {
			serr = e
		}
	}
	if err != nil {
		return err
	}
	return serr
}

// receive takes round k's messages, in slots of parity q, for round.
func (g *group) receive(ctx context.Context, me call, k uint64, q int, own []byte, got func(p int, data []byte)) error {
	mem := g.l.buf.Bytes()
	var bad []error
	for p := range g.size {
		if p == g.me {
			if len(bad) == 0 {
				got(p, own)
			}
			continue
		}
		from := g.ranks[p]
		if err := g.wait(ctx, g.seqOff(p), k+1, from, "waiting for a direct message"); err != nil {
			return err
		}
		at := g.slotOff(p, q)
		hdr := mem[at : at+hdrBytes]
		theirs := callOf(int(binary.LittleEndian.Uint64(hdr[0:])), binary.LittleEndian.Uint64(hdr[8:]))
		n := binary.LittleEndian.Uint64(hdr[16:])
		switch {
		case theirs != me:
			bad = append(bad, fmt.Errorf("%w: %s calls %s, %s calls %s", ErrMismatch, g.name(from), theirs, g.name(g.ranks[g.me]), me))
		case from == g.pred() && binary.LittleEndian.Uint64(hdr[24:]) != g.linkTo(from).word():
			bad = append(bad, fmt.Errorf("collective: %s sends on %s to %s, which takes %s (they reach each other through different backends: %s)",
				g.name(from), linkOf(binary.LittleEndian.Uint64(hdr[24:])), g.name(g.ranks[g.me]), g.linkTo(from), ibverbs.EnvBackend))
		case n > uint64(directBytes(g.c.SlotBytes)):
			bad = append(bad, fmt.Errorf("collective: %s sent a message of %d bytes, larger than a slot", g.name(from), n))
		case len(bad) == 0:
			got(p, mem[at+hdrBytes:at+hdrBytes+int(n)])
		}
	}
	g.l.rounds[g.dim]++
	return errors.Join(bad...)
}

// check is the round that starts a collective of the ring: headers
// only, so that members that disagree fail before the ring, where they
// would not agree on what to send.
func (g *group) check(ctx context.Context, me call) error {
	if g.size == 1 {
		return nil
	}
	return g.round(ctx, me, func(int) []byte { return nil }, nil, func(int, []byte) {})
}

// allReduceDirect: every member sends all of data to every other, and
// combines the members' data in the order of their places, so that every
// member's result is the same to the bit.
func allReduceDirect[T Number](ctx context.Context, g *group, me call, data []T, op Op) error {
	b := bytesOf(data)
	own := append([]byte(nil), b...)
	return g.round(ctx, me, func(int) []byte { return own }, own, func(p int, src []byte) {
		if p == 0 {
			copy(b, src)
			return
		}
		reduce(op, data, as[T](src))
	})
}

// reduceScatterDirect: every member sends chunk p of data to the member
// at place p, which combines them in the order of their places.
func reduceScatterDirect[T Number](ctx context.Context, g *group, me call, data []T, op Op) ([]T, error) {
	lo, hi := chunk(len(data), g.size, g.me)
	out := make([]T, hi-lo)
	own := bytesOf(data[lo:hi])
	err := g.round(ctx, me, func(p int) []byte {
		lo, hi := chunk(len(data), g.size, p)
		return bytesOf(data[lo:hi])
	}, own, func(p int, src []byte) {
		if p == 0 {
			copy(bytesOf(out), src)
			return
		}
		reduce(op, out, as[T](src))
	})
	return out, err
}

// allGatherDirect: every member sends its part to every other.
func allGatherDirect[T Number](ctx context.Context, g *group, me call, part, out []T) error {
	b := bytesOf(part)
	return g.round(ctx, me, func(int) []byte { return b }, b, func(p int, src []byte) {
		copy(bytesOf(out[p*len(part):(p+1)*len(part)]), src)
	})
}

// broadcastDirect: root sends data to every other member; the others
// send their headers only.
func broadcastDirect[T Number](ctx context.Context, g *group, me call, root int, data []T) error {
	b := bytesOf(data)
	msg := func(int) []byte { return nil }
	if g.me == root {
		msg = func(int) []byte { return b }
	}
	return g.round(ctx, me, msg, nil, func(p int, src []byte) {
		if p == root && p != g.me {
			copy(b, src)
		}
	})
}
