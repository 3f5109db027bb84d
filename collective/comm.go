package collective

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/ibverbs"
)

// DefaultSlotBytes is the size of a message slot: a message larger than
// it goes in pieces.
const DefaultSlotBytes = 4 << 20

// MaxDirectBytes bounds the messages of the direct path: a collective
// whose message to each peer is at most min(SlotBytes, MaxDirectBytes)
// goes direct, a larger one round the ring (see the package doc, # How).
const MaxDirectBytes = 64 << 10

// ctlBytes is the control area before a dimension's slots: its counters.
const ctlBytes = 64

// hdrBytes is the header of a direct message, before its data: the
// call's length in bytes, what the call is (tag) and the message's own
// length, and the size of the pieces its sender sends its ring
// successor (link.go).
const hdrBytes = 32

// The counters of a dimension's area, at these offsets in it.
const (
	offReceived = 0 // messages the predecessor delivered here
	offAcked    = 8 // messages of this member the successor consumed
)

// ErrDim: a collective over a dimension the mesh does not have.
var ErrDim = errors.New("collective: no such dimension")

// Comm is a communicator over the procs of a proc mesh: a member on every
// proc, each with a buffer its peers write into. It is a plain value:
// pass it to actors as an argument.
type Comm struct {
	ID        string           `msgpack:"id"`
	Procs     actorrt.Extent   `msgpack:"procs"`   // the proc mesh's extent
	Handles   []ibverbs.Handle `msgpack:"handles"` // each member's buffer, by rank
	SlotBytes int              `msgpack:"slot"`
}

// member is the collective's actor on each proc: it owns the proc's
// buffer and registers it for the collectives called there.
type member struct {
	local *local
}

func (m *member) Init(ctx *actorrt.Context, id string, slot int) error {
	ext := ctx.ActorInstance().MeshExtent()
	buf, err := ibverbs.NewBuffer(layout(ext.Dims(), slot, len(ext.Dims())))
	if err != nil {
		return err
	}
	nd := len(ext.Names())
	m.local = &local{id: id, rank: ctx.ActorInstance().Rank().Rank(), buf: buf, slot: slot,
		sent: make([]uint64, nd), received: make([]uint64, nd), rounds: make([]uint64, nd),
		outs: make([]net.Conn, nd), ins: make([]net.Conn, nd)}
	locals.Store(id, m.local)
	return nil
}

// Handle returns the member's buffer.
func (m *member) Handle(ctx *actorrt.Context) (ibverbs.Handle, error) {
	return m.local.buf.Handle(), nil
}

// Close forgets the member and frees its buffer.
func (m *member) Close(ctx *actorrt.Context) error {
	locals.Delete(m.local.id)
	m.local.mu.Lock()
	for _, c := range append(m.local.outs, m.local.ins...) {
		if c != nil {
			c.Close()
		}
	}
	m.local.mu.Unlock()
	return m.local.buf.Close()
}

func init() {
	if err := actorrt.Register[member](); err != nil {
		panic(err)
	}
}

// local is a member as the collectives of its proc use it.
type local struct {
	id   string
	rank int
	buf  *ibverbs.Buffer
	slot int

	mu       sync.Mutex // one collective at a time
	sent     []uint64   // messages sent to the successor, by dimension
	received []uint64   // messages consumed from the predecessor, by dimension
	rounds   []uint64   // direct rounds done, by dimension
	stage    [][]byte   // the direct messages being sent, by place
	// the connections to the ring successor and from the predecessor,
	// by dimension, for links through connections (link.go)
	outs, ins []net.Conn
	scratch   []byte // where a piece to combine is read (recvConn)
}

// locals holds the members of this process, by communicator id.
var locals sync.Map

// New starts a member on every proc of procs and returns the
// communicator. Its buffers live until the procs end, or Close.
func New(ctx context.Context, procs *actorrt.ProcMesh) (*Comm, error) {
	return NewWithSlot(ctx, procs, DefaultSlotBytes)
}

// NewWithSlot is New with slots of slot bytes (a multiple of 8).
func NewWithSlot(ctx context.Context, procs *actorrt.ProcMesh, slot int) (*Comm, error) {
	if slot <= 0 || slot%8 != 0 {
		return nil, fmt.Errorf("collective: a slot of %d bytes (want a positive multiple of 8)", slot)
	}
	id := fmt.Sprintf("comm-%d", nextID())
	members, err := actorrt.Init2((*member).Init).Spawn(ctx, procs, id, id, slot)
	if err != nil {
		return nil, fmt.Errorf("collective: start the members: %w", err)
	}
	hs, err := actorrt.Method((*member).Handle).Call(members).Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("collective: the members' buffers: %w", err)
	}
	return &Comm{ID: id, Procs: procs.Extent(), Handles: hs.Values(), SlotBytes: slot}, nil
}

var (
	idMu sync.Mutex
	ids  uint64
)

func nextID() uint64 {
	idMu.Lock()
	defer idMu.Unlock()
	ids++
	return ids
}

// group is this member's ring along one dimension.
type group struct {
	c    *Comm
	l    *local
	dim  int // the dimension's index
	area int // where its area starts in a member's buffer
	size int // members in the ring
	me   int // this member's place in it
	// ranks of the ring's members, by place
	ranks []int
	// last is when data last moved on a connection (UnixNano), for the
	// guard of a collective that moves data on them (guarded).
	last atomic.Int64
}

// groupOf finds this process's member of c and its ring along dim.
func groupOf(c *Comm, dim string) (*group, error) {
	v, ok := locals.Load(c.ID)
	if !ok {
		return nil, fmt.Errorf("collective: %s has no member in this process (call collectives from actors on its procs)", c.ID)
	}
	l := v.(*local)
	names := c.Procs.Names()
	d := -1
	for i, n := range names {
		if n == dim {
			d = i
		}
	}
	if d < 0 {
		return nil, fmt.Errorf("%w: %q (the procs' dimensions: %v)", ErrDim, dim, names)
	}
	me, err := c.Procs.Point(l.rank)
	if err != nil {
		return nil, err
	}
	size, _ := c.Procs.Size(dim)
	coords := me.Coords()
	g := &group{c: c, l: l, dim: d, area: c.area(d), size: size, me: coords[d]}
	for i := range size {
		coords[d] = i
		g.ranks = append(g.ranks, rankOf(c.Procs, coords))
	}
	return g, nil
}

// rankOf is the rank of coords in ext (row-major, the last dimension
// fastest).
func rankOf(ext actorrt.Extent, coords []int) int {
	r := 0
	for i, d := range ext.Dims() {
		r = r*d.Size + coords[i]
	}
	return r
}

// A member's buffer is an area per dimension, one after the other. The
// area of a dimension of n members is
//
//	ctl       ctlBytes: the ring's counters (offReceived, offAcked)
//	ring      2 slots of SlotBytes, that the ring predecessor writes
//	seq       n words, padded to 64 bytes: word s counts the direct
//	          messages member s (by its index in the dimension) delivered
//	direct    for each member s, 2 slots of hdrBytes + directBytes, that
//	          s writes its direct messages into, by the parity of the round
func areaBytes(slot, n int) int {
	return ctlBytes + 2*slot + seqBytes(n) + 2*n*(hdrBytes+directBytes(slot))
}

func seqBytes(n int) int { return (8*n + 63) / 64 * 64 }

// directBytes is the data a direct slot holds.
func directBytes(slot int) int { return min(slot, MaxDirectBytes) }

// layout is where dimension d's area starts, for the dimensions dims and
// slots of slot bytes: with d = len(dims), the buffer's size.
func layout(dims actorrt.Dims, slot, d int) int {
	at := 0
	for _, dim := range dims[:d] {
		at += areaBytes(slot, dim.Size)
	}
	return at
}

// area is where dimension d's counters and slots start in a member's
// buffer.
func (c *Comm) area(d int) int { return layout(c.Procs.Dims(), c.SlotBytes, d) }
