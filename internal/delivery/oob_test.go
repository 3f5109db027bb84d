package delivery

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

func large(tag string, n int) string { return tag + strings.Repeat(tag[:1], n-len(tag)) }

// heldBytes is what a layer holds for receivers out of band.
func (l *Layer) heldBytes() int {
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	return l.pool.heldBytes
}

// TestLargeInOrder: payloads past OutOfBand, mixed with small frames and
// runs, on a proc's subject and a group's, reach every receiver whole
// and in send order; once read, nothing stays held for them.
func TestLargeInOrder(t *testing.T) {
	srv := startServer(t)
	a, b, c := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0), newNode(t, srv, "c", 0)
	for _, r := range []*node{b, c} {
		r.layer.Subscribe(jobenv.MeshKey("g"))
		r.subscribe(testSubjects.Mesh("g"))
		r.conn.Flush(t.Context())
	}
	group := ToGroup(testSubjects, "g", []string{"b", "c"})
	var wantB, wantC []string
	for i := range 40 {
		var p string
		switch i % 4 {
		case 0:
			p = large(fmt.Sprint("L", i), OutOfBand+1+i*1000)
		case 1:
			p = large(fmt.Sprint("M", i), 3<<20)
		default:
			p = fmt.Sprint("s", i)
		}
		if i%5 == 4 {
			a.send(a.layer.ToProc("b"), p)
			wantB = append(wantB, p)
			continue
		}
		a.send(group, p)
		wantB, wantC = append(wantB, p), append(wantC, p)
	}
	waitFor(t, "every frame", func() bool { return len(b.routed()) >= len(wantB) && len(c.routed()) >= len(wantC) })
	for _, r := range []struct {
		n    *node
		want []string
	}{{b, wantB}, {c, wantC}} {
		if got := r.n.routed(); !slices.Equal(got, r.want) {
			t.Errorf("%s routed %d frames, want %d; first difference at %d", r.n.id, len(got), len(r.want), firstDiff(got, r.want))
		}
		if len(r.n.failed) > 0 || len(r.n.lost) > 0 {
			t.Errorf("%s: failed %v, lost %v", r.n.id, r.n.failed, r.n.lost)
		}
	}
	waitFor(t, "the sender to hold nothing", func() bool { return a.layer.heldBytes() == 0 })
}

// TestLargeGone: a payload its sender no longer holds when it is read (the
// buffer freed first) is an error to Failed, never a hang; what the sender
// sent after it is routed, in order.
func TestLargeGone(t *testing.T) {
	srv := startServer(t)
	a, b := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0)
	to := a.layer.ToProc("b")
	b.layer.inMu.Lock() // b takes nothing until the buffer is gone
	a.send(to, large("gone", 1<<20))
	a.send(to, "after")
	waitFor(t, "the payload to be held", func() bool { return a.layer.heldBytes() > 0 })
	a.layer.pool.close()
	b.layer.inMu.Unlock()
	waitFor(t, "the frame after", func() bool { return len(b.routed()) == 1 })
	b.mu.Lock()
	defer b.mu.Unlock()
	if got := b.got; !slices.Equal(got, []string{"after"}) {
		t.Errorf("routed %v", got)
	}
	if len(b.failed) != 1 || !strings.Contains(b.failed[0], "no longer holds") {
		t.Errorf("failed: %q; want one error saying the sender no longer holds the payload", b.failed)
	}
}

// TestLargeReferenceChecked: a frame whose reference does not read, or
// names more bytes than its buffer holds, or more than MaxPayload, or a
// buffer that is not one of the job's, is an error to Failed, allocating
// nothing of what it claims past its bounds; the frames after it go on.
func TestLargeReferenceChecked(t *testing.T) {
	srv := startServer(t)
	a, b := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0)
	ref, err := a.layer.pool.park([][]byte{bytes.Repeat([]byte{7}, 2<<20)}, 2<<20, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	// Handles that name no buffer of the job (a key nobody gave out):
	// through another process's fd on this host (init's), through this
	// one's, and at an address nothing listens on.
	stranger, unknown, elsewhere := ref.Handle, ref.Handle, ref.Handle
	stranger.Key, unknown.Key, elsewhere.Key = ref.Handle.Key+1, ref.Handle.Key+1, ref.Handle.Key+1
	stranger.PID, stranger.FD, stranger.Ino = 1, 0, 0
	elsewhere.Boot, elsewhere.Addr = "another-host", "127.0.0.1:1"
	bad := []oobRef{
		{ID: ref.ID, Size: ref.Handle.Size + 1, Handle: ref.Handle},
		{ID: ref.ID, Size: 2 << 30, Handle: ref.Handle},
		{ID: 0, Size: 10, Handle: ref.Handle},
		{ID: ref.ID, Size: 1 << 20, Handle: stranger},
		{ID: ref.ID, Size: 1 << 20, Handle: unknown},
		{ID: ref.ID, Size: 1 << 20, Handle: elsewhere},
	}
	to := a.layer.ToProc("b")
	for i, r := range bad {
		h := wire.Header{Kind: wire.KindActor, Target: "m", Method: "M", Rank: -1, Flags: wire.FlagOutOfBand}
		w := wire.NewPayload(&h, 1<<20)
		if err := w.Enc.Encode(&r); err != nil {
			t.Fatal(err)
		}
		a.layer.outMu.Lock()
		a.layer.resolve(&to)
		err := a.layer.sendOne(w, &h, to)
		a.layer.outMu.Unlock()
		w.Free()
		if err != nil {
			t.Fatal(err)
		}
		a.send(to, fmt.Sprint("after ", i))
	}
	waitFor(t, "the frames after", func() bool { return len(b.routed()) == len(bad) })
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.failed) != len(bad) {
		t.Errorf("failed %q; want %d errors", b.failed, len(bad))
	}
}

// TestLargeReleasedWhenReceiverEnds: what a sender holds for a receiver
// that ends before it reads is let go.
func TestLargeReleasedWhenReceiverEnds(t *testing.T) {
	srv := startServer(t)
	a := newNode(t, srv, "a", 0)
	a.send(a.layer.ToProc("nobody"), large("held", 1<<20))
	if a.layer.heldBytes() == 0 {
		t.Fatal("nothing held for the receiver")
	}
	a.layer.ProcGone("nobody")
	if n := a.layer.heldBytes(); n != 0 {
		t.Errorf("%d bytes still held once the receiver ended", n)
	}
}
