package delivery

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/testenv"
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
	if len(b.failed) != 1 || !strings.Contains(b.failed[0], "not served") {
		t.Errorf("failed: %q; want one error saying the buffer is not served", b.failed)
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
		a.sendRef(to, r)
		a.send(to, fmt.Sprint("after ", i))
	}
	waitFor(t, "the frames after", func() bool { return len(b.routed()) == len(bad) })
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.failed) != len(bad) {
		t.Errorf("failed %q; want %d errors", b.failed, len(bad))
	}
}

// sendRef sends d a frame out of band whose reference is r, whatever r
// says: what a buggy peer would send.
func (n *node) sendRef(d Dest, r oobRef) {
	n.t.Helper()
	h := wire.Header{Kind: wire.KindActor, Target: "m", Method: "M", Rank: -1, Flags: wire.FlagOutOfBand}
	w := wire.NewPayload(&h, 1<<20)
	defer w.Free()
	if err := w.Enc.Encode(&r); err != nil {
		n.t.Fatal(err)
	}
	n.layer.outMu.Lock()
	n.layer.resolve(&d)
	err := n.layer.sendOne(w, &h, d)
	n.layer.outMu.Unlock()
	if err != nil {
		n.t.Fatal(err)
	}
}

// TestLargeStalledOwner: references naming an owner that accepts and
// never answers, from more senders than a receiver has read slots, take
// none of them: another sender's large payload is read and routed at
// once, before any of the stalled ones fails (which takes the tcp
// backend's progress bound, 10 s). Each stalled payload then fails to
// Failed, naming the owner, and its sender's later frames are routed.
func TestLargeStalledOwner(t *testing.T) {
	srv := startServer(t)
	a, b := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0)
	stalled := testenv.StalledServer(t)
	var liars []*node
	for i := range oobFetches + 2 {
		x := newNode(t, srv, fmt.Sprint("x", i), 0)
		x.sendRef(x.layer.ToProc("b"), oobRef{ID: 1, Size: 1 << 20, Handle: ibverbs.Handle{Size: 1 << 20, Key: uint64(i + 1), FD: -1, Addr: stalled}})
		x.send(x.layer.ToProc("b"), "after "+x.id)
		liars = append(liars, x)
	}
	waitFor(t, "the stalled references to be asked", func() bool {
		b.layer.inMu.Lock()
		defer b.layer.inMu.Unlock()
		return len(b.layer.parked) == len(liars)
	})
	payload := large("real", 3<<20)
	a.send(a.layer.ToProc("b"), payload)
	a.send(a.layer.ToProc("b"), "after a")
	waitFor(t, "a's frames", func() bool { return slices.Contains(b.routed(), "after a") })
	b.mu.Lock()
	failedEarly := len(b.failed)
	b.mu.Unlock()
	if failedEarly != 0 {
		t.Errorf("%d stalled payloads had failed before a's was read: a's waited behind them", failedEarly)
	}
	waitFor(t, "every liar's frame after its stalled payload", func() bool { return len(b.routed()) == 2+len(liars) })
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.got[0] != payload {
		t.Errorf("a's payload routed as %d bytes", len(b.got[0]))
	}
	if len(b.failed) != len(liars) {
		t.Fatalf("failed: %q; want %d errors", b.failed, len(liars))
	}
	for _, f := range b.failed {
		if !strings.Contains(f, stalled) {
			t.Errorf("a stalled payload failed with %q, which does not name its owner %s", f, stalled)
		}
	}
}

// TestLargeClaimAllocatesNothing: references claiming a gigabyte in
// buffers their owners do not serve (made-up keys at a real owner's
// address, and in this process's own memory) cost the receiver no
// memory: its peak resident size does not grow by them, and 10,000
// references that fail leave less than 8 MiB of heap behind.
func TestLargeClaimAllocatesNothing(t *testing.T) {
	srv := startServer(t)
	a, b := newNode(t, srv, "a", 0), newNode(t, srv, "b", 0)
	ref, err := a.layer.pool.park([][]byte{[]byte("x")}, 1, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	to := a.layer.ToProc("b")
	const claim = 1 << 30
	peak := maxRSS(t)
	for i := range 4 {
		remote, here := ref.Handle, ref.Handle
		remote.Size, remote.Key, remote.Boot = claim, ref.Handle.Key+uint64(i)+1, ""
		here.Size, here.Key = claim, ref.Handle.Key+uint64(i)+1
		a.sendRef(to, oobRef{ID: 7, Size: claim, Handle: remote})
		a.sendRef(to, oobRef{ID: 7, Size: claim, Handle: here})
	}
	a.send(to, "after the claims")
	waitFor(t, "the frame after the claims", func() bool { return len(b.routed()) == 1 })
	if grew := maxRSS(t) - peak; grew > 256<<20 {
		t.Errorf("8 references claiming %d MiB each: the peak resident size grew by %d MiB", claim>>20, grew>>20)
	}

	heap := heapInUse()
	const n = 10000
	for i := range n {
		h := ibverbs.Handle{Size: 1 << 20, Key: uint64(i), FD: -1, Addr: "127.0.0.1:1"}
		a.sendRef(to, oobRef{ID: 7, Size: 1 << 20, Handle: h})
	}
	a.send(to, "after the references")
	waitFor(t, "the frame after the references", func() bool { return len(b.routed()) == 2 })
	if grew := int64(heapInUse()) - int64(heap); grew > 8<<20 {
		t.Errorf("%d references that failed left %d MiB of heap", n, grew>>20)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.failed) != 8+n {
		t.Errorf("%d failed, want %d", len(b.failed), 8+n)
	}
}

// maxRSS is this process's peak resident size, in bytes.
func maxRSS(t *testing.T) int64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Maxrss << 10
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
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
