package ibverbs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"
)

// TestWriteAdd: through tcp and shm, WriteAdd writes the bytes and adds
// to the word, and refuses a word that is unaligned, out of the buffer
// or inside the write, applying nothing.
func TestWriteAdd(t *testing.T) {
	for _, backend := range []string{"tcp", "shm"} {
		t.Run(backend, func(t *testing.T) {
			t.Setenv(EnvBackend, backend)
			srv := startTestServer(t, serverLimits{idle: serverIdleBound, progress: requestProgressBound, conns: 16}, false)
			b, h := testBuffer(t, 4096, srv)
			clear(b.mem)
			ctx := context.Background()
			data := bytes.Repeat([]byte{7}, 1000)
			for i := range 3 {
				if err := h.WriteAdd(ctx, data, 64, 8, 2); err != nil {
					t.Fatal(err)
				}
				if got := binary.LittleEndian.Uint64(b.mem[8:]); got != uint64(2*(i+1)) {
					t.Fatalf("word = %d after %d adds of 2", got, i+1)
				}
			}
			if !bytes.Equal(b.mem[64:1064], data) || b.mem[63] != 0 || b.mem[1064] != 0 {
				t.Fatal("the write is not where it should be")
			}
			for _, c := range []struct{ off, word int }{{64, 12}, {64, 4096}, {64, 128}, {64, 64}, {4000, 0}, {-8, 0}} {
				err := h.WriteAdd(ctx, data, c.off, c.word, 1)
				if !errors.Is(err, ErrRange) {
					t.Errorf("write at %d, add at %d: %v, want ErrRange", c.off, c.word, err)
				}
			}
			if got := binary.LittleEndian.Uint64(b.mem[8:]); got != 6 {
				t.Fatalf("word = %d after refused requests, want 6", got)
			}
		})
	}
}

// TestServeWriteAddBadInput: a peer's 'W' requests that do not fit the
// buffer (span out of range, word unaligned, out of range or inside the
// span, no such buffer) are answered by a status, with nothing applied,
// and the connection goes on serving; one cut short ends the connection.
func TestServeWriteAddBadInput(t *testing.T) {
	srv := startTestServer(t, serverLimits{idle: serverIdleBound, progress: requestProgressBound, conns: 16}, false)
	b, _ := testBuffer(t, 256, srv)
	clear(b.mem)
	key := b.handle.Key
	wa := func(key, off, n, word, delta uint64, body int) []byte {
		var args [16]byte
		binary.LittleEndian.PutUint64(args[:8], word)
		binary.LittleEndian.PutUint64(args[8:], delta)
		return append(request(writeAddOp, key, off, n, args[:]...), make([]byte, body)...)
	}
	c := dialServer(t, srv)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	for _, r := range []struct {
		req  []byte
		want byte
	}{
		{wa(key, 16, 8, 0, 1, 8), statusOK},
		{wa(key, 250, 8, 0, 1, 8), statusRange},
		{wa(key, 1<<63, 8, 0, 1, 8), statusRange},
		{wa(key, 16, 8, 3, 1, 8), statusRange},
		{wa(key, 16, 8, 256, 1, 8), statusRange},
		{wa(key, 16, 8, 1<<63, 1, 8), statusRange},
		{wa(key, 16, 8, 16, 1, 8), statusRange},
		{wa(key+1000, 16, 8, 0, 1, 8), statusNoSuch},
	} {
		if _, err := c.Write(r.req); err != nil {
			t.Fatal(err)
		}
		var st [1]byte
		if _, err := io.ReadFull(c, st[:]); err != nil {
			t.Fatal(err)
		}
		if st[0] != r.want {
			t.Errorf("%x: status %d, want %d", r.req[:41], st[0], r.want)
		}
	}
	if got := binary.LittleEndian.Uint64(b.mem[0:]); got != 1 {
		t.Errorf("word = %d, want 1: only the good request adds", got)
	}
	// A length no stream holds: the server hangs up.
	c.Write(wa(key, 16, 1<<63, 0, 1, 0))
	if n := readsToEnd(t, c); n != 0 {
		t.Errorf("%d bytes of answer to a write of 2^63 bytes", n)
	}
	// Cut short: the header's operands, then nothing.
	c = dialServer(t, srv)
	c.Write(wa(key, 16, 8, 0, 1, 0)[:30])
	c.(interface{ CloseWrite() error }).CloseWrite()
	if n := readsToEnd(t, c); n != 0 {
		t.Errorf("%d bytes of answer to a request cut short", n)
	}
}
