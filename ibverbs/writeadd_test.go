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

// TestStream: a stream's writes land in order, each counted by its add
// by the time Flush returns; one the owner refuses fails the stream
// (that call or the next, and Flush), and after Close the stream works
// again; a stream to a buffer whose owner is gone fails.
func TestStream(t *testing.T) {
	t.Setenv(EnvBackend, "tcp")
	srv := startTestServer(t, serverLimits{idle: serverIdleBound, progress: requestProgressBound, conns: 16}, false)
	b, h := testBuffer(t, 1<<20, srv)
	clear(b.mem)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := h.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	piece := make([]byte, 64<<10)
	for i := range 100 {
		for j := range piece {
			piece[j] = byte(i)
		}
		if err := s.WriteAdd(ctx, piece, 8+(i%15)*len(piece), 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(b.mem); got != 100 {
		t.Fatalf("word = %d after 100 adds", got)
	}
	// The last write to each part is the one there: i = 85..99.
	for i := 85; i < 100; i++ {
		at := 8 + (i%15)*len(piece)
		if b.mem[at] != byte(i) || b.mem[at+len(piece)-1] != byte(i) {
			t.Fatalf("part %d holds %d, want %d", i%15, b.mem[at], i)
		}
	}
	// The owner refuses a write out of its buffer: its answer fails
	// the stream.
	h2 := h
	h2.Size = 2 << 20 // a handle that misdescribes the buffer
	s2, err := h2.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.WriteAdd(ctx, piece, 1<<20, 0, 1); err != nil {
		t.Fatal(err) // sent: the answer says
	}
	if err := s2.Flush(ctx); !errors.Is(err, ErrRange) {
		t.Fatalf("Flush after a refused write: %v, want ErrRange", err)
	}
	if err := s2.WriteAdd(ctx, piece, 0, 1<<20-8, 1); !errors.Is(err, ErrRange) {
		t.Fatalf("WriteAdd on a broken stream: %v, want its failure", err)
	}
	s2.Close()
	if err := s2.WriteAdd(ctx, piece[:8], 8, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := s2.Flush(ctx); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if got := binary.LittleEndian.Uint64(b.mem); got != 101 {
		t.Fatalf("word = %d, want 101", got)
	}
	// Bad input is refused before anything is sent.
	if err := s.WriteAdd(ctx, piece, 8, 16, 1); !errors.Is(err, ErrRange) {
		t.Fatalf("an add inside the write: %v, want ErrRange", err)
	}
	// The buffer closed: the owner answers that it has none.
	b.Close()
	s.WriteAdd(ctx, piece[:8], 8, 0, 1)
	if err := s.Flush(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("to a closed buffer: %v, want ErrClosed", err)
	}
}
