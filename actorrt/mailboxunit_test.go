package actorrt

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The mailbox alone: its bound, its one wake, and the order of what a
// failed instance hands over to its stand-in.

func newTestMailbox(messages int, bytes int64) *mailbox {
	b := &mailbox{}
	b.setLimits("w[0]", msgBound{int64(messages), bytes})
	return b
}

func msg(name string, size int) envelope {
	return envelope{method: name, payload: make([]byte, size)}
}

// names lists the messages of q, by method (Init as "init").
func names(q []envelope) []string {
	var out []string
	for _, e := range q {
		if e.init {
			out = append(out, "init")
			continue
		}
		out = append(out, e.method)
	}
	return out
}

// serve takes and handles a batch, as an actor's goroutine does.
func serve(b *mailbox) []string {
	batch := b.take()
	got := names(batch)
	for i := range batch {
		b.served(&batch[i])
	}
	b.recycle(batch)
	return got
}

func TestMailboxTypeBound(t *testing.T) {
	b := newTestMailbox(3, 100)
	for i := range 3 {
		if first, err := b.stage(msg("m", 10)); err != nil || first != (i == 0) {
			t.Fatalf("stage %d: first %v, %v", i, first, err)
		}
	}
	// Staged counts: the fourth is past the bound before any flush.
	_, err := b.stage(msg("m", 10))
	if !errors.Is(err, ErrMailboxFull) || !strings.Contains(err.Error(), "actor w[0] has 3 messages (30 bytes) waiting; the bound is 3 messages, 100 bytes") {
		t.Fatalf("a fourth message: %v, want ErrMailboxFull naming the actor, what waits and the bound", err)
	}
	b.flush()
	if err := b.push(msg("m", 1)); !errors.Is(err, ErrMailboxFull) {
		t.Fatalf("push past the bound: %v", err)
	}
	// The runtime's own messages always go in.
	if err := b.push(envelope{init: true}); err != nil {
		t.Fatalf("Init past the bound: %v", err)
	}
	if err := b.push(envelope{failure: &MeshFailure{}}); err != nil {
		t.Fatalf("a failure for Supervise past the bound: %v", err)
	}
	// Handled messages make room again.
	if got := serve(b); len(got) != 5 {
		t.Fatalf("served %v, want the 5 queued", got)
	}
	if err := b.push(msg("m", 100)); err != nil {
		t.Fatalf("100 bytes in an empty mailbox of 100: %v", err)
	}
	if err := b.push(msg("m", 1)); !errors.Is(err, ErrMailboxFull) || !strings.Contains(err.Error(), "1 messages (100 bytes)") {
		t.Fatalf("a byte past the byte bound: %v", err)
	}
}

func TestMailboxTypeWake(t *testing.T) {
	b := newTestMailbox(1000, 1<<20)
	woken := func() bool {
		select {
		case <-b.wake:
			return true
		default:
			return false
		}
	}
	if woken() {
		t.Fatal("an empty mailbox woke its server")
	}
	for range 100 { // never blocks, one signal however many
		if err := b.push(msg("m", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if !woken() || woken() {
		t.Fatal("a hundred pushes to an empty mailbox: want one signal")
	}
	b.push(msg("m", 1))
	if woken() {
		t.Fatal("a push to a mailbox not empty woke its server again")
	}
	serve(b)
	b.stage(msg("m", 1))
	if woken() {
		t.Fatal("a staged message woke the server before its flush")
	}
	b.flush()
	if !woken() {
		t.Fatal("a flush into an empty mailbox did not wake its server")
	}
	b.handOver([]envelope{{init: true}}, true)
	if !woken() {
		t.Fatal("a hand-over did not wake the server")
	}
}

// TestMailboxTypeHandOverOrder: a stand-in's Init comes first, then what the
// failed instance left (in its order, however it comes: its queue, then
// what is routed to it after it left), then what was routed to the
// stand-in itself.
func TestMailboxTypeHandOverOrder(t *testing.T) {
	prev, next := newTestMailbox(100, 1<<20), newTestMailbox(100, 1<<20)
	prev.push(msg("a1", 1))
	prev.push(msg("a2", 1))
	prev.push(msg("a3", 1))

	// The stand-in holds its own messages until its order comes.
	next.stage(msg("n1", 1))
	next.flush()
	next.handOver([]envelope{{init: true}}, true)

	// prev is in the middle of a batch: a1 handled, a2 and a3 left.
	batch := prev.take()
	prev.served(&batch[0])
	prev.push(msg("a4", 1)) // queued behind the batch
	next.handOver(prev.leave(batch[1:]), false)

	// Routed to prev after it left: back from flush, to the stand-in.
	prev.stage(msg("a5", 1))
	next.handOver(prev.flush(), false)
	if prev.take() != nil {
		t.Fatal("a mailbox that was left queued a message")
	}

	want := []string{"init", "a2", "a3", "a4", "a5", "n1"}
	if got := serve(next); !slices.Equal(got, want) {
		t.Fatalf("the stand-in serves %v, want %v", got, want)
	}
	// Once served, a later hand-over goes first again.
	next.push(msg("n2", 1))
	next.handOver([]envelope{msg("a6", 1)}, false)
	if got := serve(next); !slices.Equal(got, []string{"a6", "n2"}) {
		t.Fatalf("after a batch, the stand-in serves %v, want [a6 n2]", got)
	}
	if n, bytes := next.pending.Load(), next.pendingBytes.Load(); n != 0 || bytes != 0 {
		t.Fatalf("all served, the bound still counts %d messages, %d bytes", n, bytes)
	}
}
