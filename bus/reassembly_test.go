package bus

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
	"github.com/nats-io/nats.go"
)

// White-box tests of what Run does with each received message: batches,
// chunks and stray headers, without a server.

// testConn is a Conn with only what deliver needs, and every report kept.
type testConn struct {
	*Conn
	reports []error
	got     [][]byte
}

func newTestConn(maxMessage, maxReassembly int) *testConn {
	tc := &testConn{}
	tc.Conn = &Conn{partials: map[string]*partial{}, maxMessage: maxMessage, maxReassembly: maxReassembly,
		onError: func(err error) { tc.reports = append(tc.reports, err) }}
	return tc
}

func (tc *testConn) deliver(m *nats.Msg) {
	tc.Conn.deliver(m, func(m Message) { tc.got = append(tc.got, m.Data) })
}

func chunkMsg(value string, data []byte) *nats.Msg {
	return &nats.Msg{Subject: "s", Data: data, Header: nats.Header{chunkHeader: []string{value}}}
}

func batchMsg(count string, data []byte) *nats.Msg {
	return &nats.Msg{Subject: "s", Data: data, Header: nats.Header{batchHeader: []string{count}}}
}

// checkHeld checks the books of reassembly: held is the sum of what the
// partials count, stays within the limit, and no partial counts more than
// twice the bytes it received (plus its bookkeeping).
func (tc *testConn) checkHeld(t testing.TB) {
	t.Helper()
	sum := 0
	for id, p := range tc.partials {
		sum += p.charge
		if limit := partialOverhead + len(id) + 2*p.have; p.charge > limit {
			t.Fatalf("message %s counts %d bytes for %d received", id, p.charge, p.have)
		}
		if p.discard && (p.buf != nil || p.parts != nil) {
			t.Fatalf("dropped message %s still holds its bytes", id)
		}
	}
	if sum != tc.held {
		t.Fatalf("held %d, but the partials count %d", tc.held, sum)
	}
	if tc.held > tc.maxReassembly {
		t.Fatalf("held %d, over the limit of %d", tc.held, tc.maxReassembly)
	}
}

// TestChunkHeadersCheckedBeforeAllocating sends first parts of a few bytes
// that claim the largest message: nothing near that size may be
// allocated, whatever the number of ids. A claim that does not match the
// part's length is dropped; one that does is kept, at the cost of the
// bytes that came.
func TestChunkHeadersCheckedBeforeAllocating(t *testing.T) {
	tc := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
	const ids = 64
	run := 0
	n := alloc.By(func() {
		run++
		for i := range ids {
			tc.deliver(chunkMsg(fmt.Sprintf("bad%d.%d 0 2 %d", run, i, DefaultMaxMessage), []byte("tiny")))
			tc.deliver(chunkMsg(fmt.Sprintf("fits%d.%d 0 %d %d", run, i, DefaultMaxMessage/4, DefaultMaxMessage), []byte("tiny")))
		}
	})
	if n > 3*2*ids*(partialOverhead+64)+alloc.Slack {
		t.Fatalf("%d first parts of 4 bytes allocated %d bytes", 2*ids, n)
	}
	tc.checkHeld(t)
	if got := tc.Dropped(DropChunk); got != 3*ids {
		t.Errorf("Dropped(chunk) = %d, want %d", got, 3*ids)
	}
	if len(tc.partials) != 3*ids || tc.held > 3*ids*(partialOverhead+20) {
		t.Errorf("%d partials hold %d bytes", len(tc.partials), tc.held)
	}
	if len(tc.reports) != 1 {
		t.Errorf("%d reports, want one for the kind: %v", len(tc.reports), tc.reports)
	}
}

func TestChunkDrops(t *testing.T) {
	part := bytes.Repeat([]byte{'x'}, 100)
	tests := []struct {
		name  string
		parts []*nats.Msg
		kind  DropKind
		drops uint64
	}{
		{"no fields", []*nats.Msg{chunkMsg("junk", part)}, DropChunk, 1},
		{"not numbers", []*nats.Msg{chunkMsg("a b c d", part)}, DropChunk, 1},
		{"negative size", []*nats.Msg{chunkMsg("a 0 2 -5", part)}, DropChunk, 1},
		{"over max message", []*nats.Msg{chunkMsg(fmt.Sprintf("a 0 2 %d", DefaultMaxMessage+1), part)}, DropChunk, 1},
		{"index past count", []*nats.Msg{chunkMsg("a 3 2 150", part)}, DropChunk, 1},
		{"more parts than bytes", []*nats.Msg{chunkMsg("a 0 1000 150", part)}, DropChunk, 1},
		{"empty part", []*nats.Msg{chunkMsg("a 0 2 150", nil)}, DropChunk, 1},
		{"long id", []*nats.Msg{chunkMsg(string(bytes.Repeat([]byte{'i'}, 65))+" 0 2 150", part)}, DropChunk, 1},
		{"starts late", []*nats.Msg{chunkMsg("a 1 2 150", part[:50])}, DropChunk, 1},
		{"part skipped", []*nats.Msg{chunkMsg("a 0 3 250", part), chunkMsg("a 2 3 250", part[:50])}, DropChunk, 1},
		{"short middle part", []*nats.Msg{chunkMsg("a 0 3 250", part), chunkMsg("a 1 3 250", part[:99]), chunkMsg("a 2 3 250", part[:50])}, DropChunk, 1},
		{"long last part", []*nats.Msg{chunkMsg("a 0 2 150", part), chunkMsg("a 1 2 150", part)}, DropChunk, 1},
		{"size changes", []*nats.Msg{chunkMsg("a 0 2 150", part), chunkMsg("a 1 2 160", part[:60])}, DropChunk, 1},
		{"other subject", []*nats.Msg{chunkMsg("a 0 2 150", part), {Subject: "t", Data: part[:50], Header: nats.Header{chunkHeader: []string{"a 1 2 150"}}}}, DropChunk, 1},
		{"unknown header", []*nats.Msg{{Subject: "s", Data: part, Header: nats.Header{"X-Other": []string{"1"}}}}, DropHeader, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
			for _, m := range tt.parts {
				tc.deliver(m)
				tc.checkHeld(t)
			}
			if len(tc.got) != 0 {
				t.Errorf("delivered %d messages", len(tc.got))
			}
			if got := tc.Dropped(tt.kind); got != tt.drops {
				t.Errorf("Dropped(%s) = %d, want %d", tt.kind, got, tt.drops)
			}
			if len(tc.partials) != 0 || tc.held != 0 {
				t.Errorf("left %d partials holding %d bytes", len(tc.partials), tc.held)
			}
			// The connection goes on: a whole message after the bad ones
			// is delivered.
			tc.deliver(&nats.Msg{Subject: "s", Data: []byte("next")})
			if len(tc.got) != 1 || string(tc.got[0]) != "next" {
				t.Errorf("after the drop: got %q", tc.got)
			}
		})
	}
}

// TestDroppedMessageSwallowsItsParts: after one bad part, the rest of that
// message is swallowed quietly (one drop, not one per part), and a message
// interleaved with it is whole.
func TestDroppedMessageSwallowsItsParts(t *testing.T) {
	tc := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
	good := bytes.Repeat([]byte("g"), 250)
	part := bytes.Repeat([]byte("b"), 100)
	for _, m := range []*nats.Msg{
		chunkMsg("bad 0 4 350", part),
		chunkMsg("good 0 3 250", good[:100]),
		chunkMsg("bad 2 4 350", part), // part 1 is missing
		chunkMsg("good 1 3 250", good[100:200]),
		chunkMsg("bad 3 4 350", part[:50]),
		chunkMsg("good 2 3 250", good[200:]),
	} {
		tc.deliver(m)
		tc.checkHeld(t)
	}
	if len(tc.got) != 1 || !bytes.Equal(tc.got[0], good) {
		t.Fatalf("delivered %d messages", len(tc.got))
	}
	if d := tc.Dropped(DropChunk); d != 1 {
		t.Errorf("Dropped(chunk) = %d, want 1", d)
	}
	if len(tc.partials) != 0 || tc.held != 0 {
		t.Errorf("left %d partials holding %d bytes", len(tc.partials), tc.held)
	}
}

// TestReassemblyLimit: messages in reassembly may not hold more than
// MaxReassembly together; the one that would pass it is dropped, the
// others complete.
func TestReassemblyLimit(t *testing.T) {
	const size = 40 << 10
	tc := newTestConn(64<<10, 100<<10)
	msgs := make([][]byte, 3)
	for i := range msgs {
		msgs[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
	}
	var parts [3][]*nats.Msg
	for i, msg := range msgs {
		splitChunks("m"+strconv.Itoa(i), msg, 8<<10, func(v string, p []byte) error {
			parts[i] = append(parts[i], chunkMsg(v, p))
			return nil
		})
	}
	// Interleaved: a, b, c, a, b, c, ... Each is allocated in full at
	// half its bytes; the third does not fit beside the first two.
	for k := range parts[0] {
		for i := range parts {
			tc.deliver(parts[i][k])
			tc.checkHeld(t)
		}
	}
	if len(tc.got) != 2 || !bytes.Equal(tc.got[0], msgs[0]) || !bytes.Equal(tc.got[1], msgs[1]) {
		t.Fatalf("delivered %d messages", len(tc.got))
	}
	if d := tc.Dropped(DropChunkLimit); d != 1 {
		t.Errorf("Dropped(chunk-limit) = %d, want 1", d)
	}
	if d := tc.Dropped(DropChunk); d != 0 {
		t.Errorf("Dropped(chunk) = %d, want 0: the dropped message's later parts are swallowed", d)
	}
	if len(tc.partials) != 0 || tc.held != 0 {
		t.Errorf("left %d partials holding %d bytes", len(tc.partials), tc.held)
	}
	// With room again, a message of the largest size goes through.
	big := bytes.Repeat([]byte{'z'}, 64<<10)
	splitChunks("big", big, 8<<10, func(v string, p []byte) error { tc.deliver(chunkMsg(v, p)); return nil })
	if len(tc.got) != 3 || !bytes.Equal(tc.got[2], big) {
		t.Fatalf("the largest message after the drop: %d messages", len(tc.got))
	}
}

func TestPartialsExpire(t *testing.T) {
	tc := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
	tc.deliver(chunkMsg("slow 0 3 250", make([]byte, 100)))
	if len(tc.partials) != 1 || tc.held == 0 {
		t.Fatalf("%d partials holding %d bytes", len(tc.partials), tc.held)
	}
	tc.expirePartials(time.Now().Add(PartialTTL / 2))
	if len(tc.partials) != 1 {
		t.Fatal("a message expired before its time")
	}
	tc.expirePartials(time.Now().Add(PartialTTL + time.Second))
	if len(tc.partials) != 0 || tc.held != 0 || tc.Dropped(DropChunkExpired) != 1 {
		t.Fatalf("after expiry: %d partials holding %d bytes, %d expired", len(tc.partials), tc.held, tc.Dropped(DropChunkExpired))
	}
}

func TestBatchDrops(t *testing.T) {
	var good []byte
	for _, s := range []string{"one", "two", "three"} {
		good = binary.AppendUvarint(good, uint64(len(s)))
		good = append(good, s...)
	}
	tests := []struct {
		name  string
		count string
		data  []byte
		want  int // messages handled before the fault
	}{
		{"count not a number", "x", good, 0},
		{"count zero", "0", good, 0},
		{"count larger than the bytes", "1000000000000", good, 0},
		{"cut short", "4", good, 3},
		{"length past the end", "1", []byte{0x7f, 'a'}, 0},
		{"bad varint", "1", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0},
		{"bytes left over", "2", good, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
			n := alloc.By(func() { tc.deliver(batchMsg(tt.count, tt.data)) })
			if len(tc.got) != 3*tt.want {
				t.Errorf("handled %d messages, want %d", len(tc.got)/3, tt.want)
			}
			if d := tc.Dropped(DropBatch); d != 3 {
				t.Errorf("Dropped(batch) = %d, want 3", d)
			}
			if len(tc.reports) != 1 {
				t.Errorf("%d reports, want 1", len(tc.reports))
			}
			if n > alloc.Slack {
				t.Errorf("a batch of %d bytes allocated %d", len(tt.data), n)
			}
		})
	}
}

func TestChunksRoundTrip(t *testing.T) {
	for _, tt := range []struct{ size, part int }{{1, 1}, {10, 3}, {4096, 1000}, {1 << 20, 64 << 10}, {1<<20 + 1, 64 << 10}} {
		tc := newTestConn(DefaultMaxMessage, DefaultMaxReassembly)
		msg := make([]byte, tt.size)
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		splitChunks("rt", msg, tt.part, func(v string, p []byte) error {
			tc.deliver(chunkMsg(v, p))
			tc.checkHeld(t)
			return nil
		})
		if len(tc.got) != 1 || !bytes.Equal(tc.got[0], msg) {
			t.Fatalf("%d bytes in parts of %d: got %d messages", tt.size, tt.part, len(tc.got))
		}
		if tc.held != 0 || len(tc.partials) != 0 {
			t.Fatalf("%d bytes in parts of %d: %d partials left holding %d", tt.size, tt.part, len(tc.partials), tc.held)
		}
	}
}

// TestSplitPartsAsJoined: a message given in parts is cut into the chunks
// the joined message would be, whatever the parts' bounds; a chunk within
// one part is that part's own bytes, not a copy.
func TestSplitPartsAsJoined(t *testing.T) {
	msg := make([]byte, 1000)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	for _, bounds := range [][]int{{1000}, {0, 1000}, {1, 999}, {100, 100, 800}, {99, 1, 0, 100, 700, 100}, {10, 500, 490}, {333, 333, 334}} {
		var parts [][]byte
		at := 0
		inOnePart := func(lo, hi int) bool { // whether msg[lo:hi] lies in one part
			start := 0
			for _, n := range bounds {
				if lo >= start && hi <= start+n {
					return true
				}
				start += n
			}
			return false
		}
		for _, n := range bounds {
			parts = append(parts, msg[at:at+n])
			at += n
		}
		for _, size := range []int{1, 7, 100, 250, 999, 1000, 5000} {
			var want []string
			splitChunks("id", msg, size, func(v string, p []byte) error {
				want = append(want, v)
				return nil
			})
			var scratch []byte
			i := 0
			splitParts("id", parts, len(msg), size, &scratch, func(v string, p []byte) error {
				lo, hi := i*size, min((i+1)*size, len(msg))
				switch {
				case i >= len(want) || v != want[i] || !bytes.Equal(p, msg[lo:hi]):
					t.Fatalf("parts %v, chunks of %d: chunk %d is %q (%d bytes)", bounds, size, i, v, len(p))
				case inOnePart(lo, hi) != (&p[0] == &msg[lo]):
					t.Fatalf("parts %v, chunks of %d: chunk %d [%d, %d) in one part: %v, shares it: %v", bounds, size, i, lo, hi, inOnePart(lo, hi), &p[0] == &msg[lo])
				}
				i++
				return nil
			})
			if i != len(want) {
				t.Fatalf("parts %v, chunks of %d: %d chunks, want %d", bounds, size, i, len(want))
			}
		}
	}
}
