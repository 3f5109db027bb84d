package reliable

import (
	"bytes"
	"fmt"
	"testing"
)

// The history's ring wraps and grows, and its slabs are reused once
// their messages leave: what it gives back must be what went in, and
// what it holds must go once its messages do.
func TestHistoryKeepsBytesAcrossWrapsAndReuse(t *testing.T) {
	var h history
	body := func(i uint64) []byte { return bytes.Repeat([]byte(fmt.Sprint(i%10)), 1+int(i%3000)) }
	var next uint64 // the oldest still in h
	for i := uint64(0); i < 20000; i++ {
		num := h.push(i+1, 1, int64(i), 0, [][]byte{[]byte("head:"), body(i)})
		if num != i {
			t.Fatalf("message %d numbered %d", i, num)
		}
		// Keep a window of 1..2000 messages: the ring wraps, slabs go.
		for h.n > int(1+i%2000) {
			k := h.at(next)
			want := append([]byte("head:"), body(next)...)
			if k.seq != next+1 || !bytes.Equal(h.frame(k), want) {
				t.Fatalf("message %d: seq %d, %d bytes, want %d", next, k.seq, len(h.frame(k)), len(want))
			}
			h.pop()
			next++
		}
	}
	for h.n > 0 {
		h.pop()
	}
	h.shrink()
	if len(h.slabs) != 1 || h.slabs[0].live != 0 || h.slabMem > (spareSlabs+1)*slabSize {
		t.Fatalf("empty history holds %d slabs (%d live bytes), %d bytes in all", len(h.slabs), h.slabs[0].live, h.slabMem)
	}
	if len(h.ring) > 1024 {
		t.Fatalf("empty history's ring is %d long", len(h.ring))
	}
}

// A history holds what its messages take: a first message costs a small
// slab and a short ring, not a 1 MB slab; a stream grows the slabs,
// doubling, to slabSize and no further (but for a message larger than
// that, which gets a slab of its own size).
func TestHistorySlabsGrowToUse(t *testing.T) {
	var h history
	h.push(1, 1, 0, 0, [][]byte{make([]byte, 100)})
	if h.slabMem != minSlab || len(h.ring) != minRing {
		t.Fatalf("one message of 100 bytes holds %d bytes of slab and a ring of %d", h.slabMem, len(h.ring))
	}
	for seq := uint64(2); h.slabMem < 8*slabSize; seq++ {
		h.push(seq, 1, 0, 0, [][]byte{make([]byte, 1000)})
	}
	want := minSlab
	for i, s := range h.slabs {
		if len(s.buf) != want {
			t.Fatalf("slab %d is %d bytes, want %d", i, len(s.buf), want)
		}
		want = min(slabSize, 2*want)
	}
	h.push(h.at(h.base+uint64(h.n)-1).seq+1, 1, 0, 0, [][]byte{make([]byte, 3*slabSize+1)})
	if got := len(h.slabs[len(h.slabs)-1].buf); got != 3*slabSize+1 {
		t.Fatalf("a message of %d bytes has a slab of %d", 3*slabSize+1, got)
	}
}
