package bus

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
	"github.com/nats-io/nats.go"
)

// Fuzz targets for what a peer can put in front of Run: batches and
// chunks. `go test` runs their seed corpora (testdata/fuzz/FuzzX) as
// plain tests; `go test -fuzz '^FuzzX$'` explores further.

// FuzzBatch delivers one batch: no panic, no allocation to speak of, only
// bytes of the batch handed on, and a batch that is accepted comes out the
// same when packed again.
func FuzzBatch(f *testing.F) {
	f.Add("3", packBatch([]byte("one"), []byte("two"), []byte("three")))
	f.Add("2", packBatch(bytes.Repeat([]byte{1}, 300), nil))
	f.Fuzz(func(t *testing.T, count string, data []byte) {
		tc := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
		n := alloc.By(func() { tc.deliver(batchMsg(count, data)) })
		if n > alloc.Slack {
			t.Fatalf("a batch of %d bytes allocated %d", len(data), n)
		}
		total := 0
		for _, m := range tc.got {
			total += len(m)
		}
		if total > 3*len(data) {
			t.Fatalf("handed on %d bytes from 3 deliveries of %d", total, len(data))
		}
		if tc.Dropped(DropBatch) > 0 {
			return
		}
		// Accepted (three times): pack the messages of one delivery again.
		one := tc.got[:len(tc.got)/3]
		again := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
		again.deliver(batchMsg(strconv.Itoa(len(one)), packBatch(one...)))
		if again.Dropped(DropBatch) != 0 || len(again.got) != len(one) {
			t.Fatalf("repacked batch: %d of %d messages, %d drops", len(again.got), len(one), again.Dropped(DropBatch))
		}
		for i := range one {
			if !bytes.Equal(one[i], again.got[i]) {
				t.Fatalf("message %d changed when repacked", i)
			}
		}
	})
}

func packBatch(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
	}
	return b
}

// FuzzChunks delivers three parts with arbitrary chunk headers: no panic,
// the books of reassembly balance and hold at most twice what came, the
// allocation is bounded by the input, and a message that comes out is the
// parts it claims, in order. Then it splits the first part's bytes as a
// message and checks they come back whole.
func FuzzChunks(f *testing.F) {
	msg := bytes.Repeat([]byte("0123456789"), 25)
	var values []string
	var parts [][]byte
	splitChunks("seed", msg, 100, func(v string, p []byte) error {
		values, parts = append(values, v), append(parts, p)
		return nil
	})
	f.Add(values[0], parts[0], values[1], parts[1], values[2], parts[2], uint16(100))
	f.Add("a 0 2 150", msg[:100], "b 0 1 5", msg[:5], "a 1 2 150", msg[:50], uint16(7))
	f.Fuzz(func(t *testing.T, v1 string, d1 []byte, v2 string, d2 []byte, v3 string, d3 []byte, size uint16) {
		in := []*nats.Msg{chunkMsg(v1, d1), chunkMsg(v2, d2), chunkMsg(v3, d3)}
		var tc *testConn
		n := alloc.By(func() {
			tc = newTestConn(1<<20, 2<<20)
			for _, m := range in {
				tc.deliver(m)
				tc.checkHeld(t)
			}
		})
		if limit := uint64(2*(len(d1)+len(d2)+len(d3))) + alloc.Slack; n > limit {
			t.Fatalf("parts of %d, %d and %d bytes allocated %d", len(d1), len(d2), len(d3), n)
		}
		for _, m := range tc.got {
			if !isConcatOf(m, d1, d2, d3) {
				t.Fatalf("delivered %d bytes that are not parts received in order", len(m))
			}
		}

		// Round trip: any message, in parts of any size, comes back whole.
		if size == 0 || len(d1) == 0 {
			return
		}
		rt := newTestConn(1<<20, 2<<20)
		splitChunks("rt", d1, int(size), func(v string, p []byte) error {
			rt.deliver(chunkMsg(v, p))
			return nil
		})
		if len(rt.got) != 1 || !bytes.Equal(rt.got[0], d1) || len(rt.partials) != 0 || rt.held != 0 {
			t.Fatalf("%d bytes in parts of %d: %d messages, %d partials", len(d1), size, len(rt.got), len(rt.partials))
		}
	})
}

// isConcatOf reports whether m is some of the parts (a message's parts
// may be interleaved with another's), in order, joined.
func isConcatOf(m []byte, parts ...[]byte) bool {
	for set := 1; set < 1<<len(parts); set++ {
		var joined []byte
		for i, p := range parts {
			if set&(1<<i) != 0 {
				joined = append(joined, p...)
			}
		}
		if bytes.Equal(joined, m) {
			return true
		}
	}
	return false
}
