package reliable

// history holds the messages an outbox keeps to resend, across its
// subjects, oldest first. Message number base+i is ring[(start+i)&mask];
// the bytes of each are in a slab. Neither the ring nor a slab holds a
// pointer, so a history of millions of messages costs the collector
// nothing to scan, and keeping a message allocates nothing of its own.
type history struct {
	ring  []kept // a power of two long
	start int
	n     int
	base  uint64 // the number of the oldest message

	slabs    []slab // oldest first; the last one is being filled
	slabBase uint64 // the number of slabs[0]
	spare    [][]byte
	slabMem  int // bytes of the slabs held, spare ones too
}

// kept is a message in the history.
type kept struct {
	seq   uint64 // the first number of the frame's messages
	n     uint32 // how many messages it holds (a run: seq..seq+n-1)
	at    int64  // when it was sent (UnixNano)
	slab  uint64
	off   uint32
	size  uint32
	subj  uint32 // its subject's id
	acked bool   // its receivers have it: the bytes are as good as freed
}

type slab struct {
	buf  []byte
	used int // bytes handed out
	live int // bytes handed out to messages still in the history
}

const (
	// A history's first slab is minSlab long, and each new one twice the
	// last, up to slabSize: a proc that sends little holds little (a 1 MB
	// slab each was most of a quiet proc's memory), one that sends a lot
	// soon fills whole slabs, which leave to the spares and come back.
	minSlab    = 4 << 10
	slabSize   = 1 << 20
	spareSlabs = 4
	// minRing is the ring's first length, in messages.
	minRing = 16
	// maxKept bounds the messages in a history, whatever their size.
	maxKept = 1 << 22
)

// push appends a frame of n messages numbered from seq, of its parts'
// bytes (copied), and returns its number in the history.
func (h *history) push(seq uint64, n uint32, at int64, subj uint32, parts [][]byte) uint64 {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	num, off := h.alloc(size)
	buf := h.slabs[len(h.slabs)-1].buf[off:off]
	for _, p := range parts {
		buf = append(buf, p...)
	}
	if h.n == len(h.ring) {
		h.grow()
	}
	h.ring[(h.start+h.n)&(len(h.ring)-1)] = kept{seq: seq, n: n, at: at, slab: num, off: uint32(off), size: uint32(size), subj: subj}
	h.n++
	return h.base + uint64(h.n-1)
}

// alloc finds room for size bytes in the last slab, or a new one.
func (h *history) alloc(size int) (num uint64, off int) {
	if len(h.slabs) == 0 || h.slabs[len(h.slabs)-1].used+size > len(h.slabs[len(h.slabs)-1].buf) {
		var buf []byte
		if size <= slabSize && len(h.spare) > 0 {
			buf = h.spare[len(h.spare)-1] // counted in slabMem already
			h.spare = h.spare[:len(h.spare)-1]
		} else {
			buf = make([]byte, max(h.nextSlab(), size))
			h.slabMem += len(buf)
		}
		h.slabs = append(h.slabs, slab{buf: buf})
	}
	last := &h.slabs[len(h.slabs)-1]
	off = last.used
	last.used += size
	last.live += size
	return h.slabBase + uint64(len(h.slabs)-1), off
}

// nextSlab is the length of a new slab: twice the last one's, from
// minSlab up to slabSize.
func (h *history) nextSlab() int {
	if len(h.slabs) == 0 {
		return minSlab
	}
	return min(slabSize, max(minSlab, 2*len(h.slabs[len(h.slabs)-1].buf)))
}

func (h *history) grow() {
	ring := make([]kept, max(minRing, 2*len(h.ring)))
	for i := 0; i < h.n; i++ {
		ring[i] = h.ring[(h.start+i)&(len(h.ring)-1)]
	}
	h.ring, h.start = ring, 0
}

// at is message number num, which must be in the history.
func (h *history) at(num uint64) *kept {
	return &h.ring[(h.start+int(num-h.base))&(len(h.ring)-1)]
}

// frame is the bytes of k.
func (h *history) frame(k *kept) []byte {
	return h.slabs[k.slab-h.slabBase].buf[k.off : k.off+k.size]
}

// front is the oldest message; nil if none.
func (h *history) front() *kept {
	if h.n == 0 {
		return nil
	}
	return &h.ring[h.start]
}

// pop drops the oldest message, and the slabs nothing in the history
// uses any more.
func (h *history) pop() {
	k := h.front()
	s := &h.slabs[k.slab-h.slabBase]
	s.live -= int(k.size)
	*k = kept{}
	h.start = (h.start + 1) & (len(h.ring) - 1)
	h.n--
	h.base++
	// Frames leave in the order they came: so do slabs.
	for len(h.slabs) > 1 && h.slabs[0].live == 0 {
		if buf := h.slabs[0].buf; len(buf) == slabSize && len(h.spare) < spareSlabs {
			h.spare = append(h.spare, buf)
		} else {
			h.slabMem -= len(buf)
		}
		h.slabs[0] = slab{}
		h.slabs = h.slabs[1:]
		h.slabBase++
	}
	if h.n == 0 && len(h.slabs) == 1 {
		// Empty: the last slab starts over.
		h.slabs[0].used, h.slabs[0].live = 0, 0
	}
}

// shrink gives back most of a ring that a burst grew, once it is mostly
// empty: called at a tick, so that a steady stream does not grow and
// shrink it over and over.
func (h *history) shrink() {
	if len(h.ring) <= 1024 || h.n >= len(h.ring)/8 {
		return
	}
	ring := make([]kept, len(h.ring)/4)
	for i := 0; i < h.n; i++ {
		ring[i] = h.ring[(h.start+i)&(len(h.ring)-1)]
	}
	h.ring, h.start = ring, 0
}

// last is the number of k's last message.
func (k *kept) last() uint64 { return k.seq + uint64(k.n) - 1 }
