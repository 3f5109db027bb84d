package actorrt_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

// spawnProcs starts procs for one test and stops them after it.
func spawnProcs(t *testing.T, dims actorrt.Dims) *actorrt.ProcMesh {
	t.Helper()
	ctx := rootCtx(t) // bounded by the spawn and stop timeouts
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, dims)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := procs.Stop(ctx); err != nil {
			t.Errorf("stop procs: %v", err)
		}
	})
	return procs
}

func spawn[T any](t *testing.T, procs *actorrt.ProcMesh, name string, args ...any) *actorrt.ActorMesh[T] {
	t.Helper()
	m, err := actorrt.Spawn[T](testCtx(t), procs, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGuideCounters is the guide's counter walk-through, checked.
func TestGuideCounters(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	counter := spawn[Counter](t, actorrt.ThisProc(ctx), "counter-local", 0)
	v, err := actorrt.Method((*Counter).GetValue).CallOne(counter).Get(ctx)
	if err != nil || v != 0 {
		t.Fatalf("local counter = %d, %v; want 0", v, err)
	}

	procs := spawnProcs(t, actorrt.Dims{{"gpus", 8}})
	if got := procs.Extent().String(); got != "{gpus: 8}" {
		t.Fatalf("procs extent %s", got)
	}
	counters := spawn[Counter](t, procs, "counters", 0)
	if err := actorrt.VoidMethod((*Counter).Increment).Broadcast(counters); err != nil {
		t.Fatal(err)
	}
	if err := actorrt.VoidMethod((*Counter).Increment).Broadcast(counters.Slice("gpus", 0, 4)); err != nil {
		t.Fatal(err)
	}
	values, err := actorrt.Method((*Counter).GetValue).Call(counters).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{2, 2, 2, 2, 1, 1, 1, 1}; !reflect.DeepEqual(values.Values(), want) {
		t.Fatalf("values %v, want %v", values.Values(), want)
	}
	if got := values.String(); got != "ValueMesh{gpus: 8} [2 2 2 2 1 1 1 1]" {
		t.Errorf("printed as %q", got)
	}
	// Arguments and results travel: Add returns the new value.
	added, err := actorrt.Method1((*Counter).Add).Call(counters.Slice("gpus", 6, 8), 10).Get(ctx)
	if err != nil || !reflect.DeepEqual(added.Values(), []int{11, 11}) {
		t.Fatalf("Add = %v, %v", added, err)
	}
}

// TestMessageRanks: a member's message rank is its place in the slice the
// message went to; its actor rank is its place in the whole mesh.
func TestMessageRanks(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	echo := spawn[Echo](t, procs, "where")
	got, err := actorrt.Method((*Echo).Where).Call(echo.Slice("gpus", 1, 2)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"{hosts: 0, gpus: 1} {hosts: 0, gpus: 0}", "{hosts: 1, gpus: 1} {hosts: 1, gpus: 0}"}
	if !reflect.DeepEqual(got.Values(), want) {
		t.Fatalf("Where on gpus 1:2 = %q, want %q", got.Values(), want)
	}
	one, err := actorrt.Method((*Echo).Where).CallOne(echo.At("hosts", 1).At("gpus", 0)).Get(ctx)
	if err != nil || one != "{hosts: 1, gpus: 0} {}" {
		t.Fatalf("Where on hosts=1,gpus=0 = %q, %v", one, err)
	}
	// Stream yields every member's reply; Choose picks one member.
	n := 0
	for v, err := range actorrt.Method((*Echo).Ping).Stream(echo).All(ctx) {
		if err != nil || v != 1 {
			t.Fatalf("stream item %d, %v", v, err)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("stream gave %d replies, want 4", n)
	}
	if v, err := actorrt.Method((*Echo).Ping).Choose(echo).Get(ctx); err != nil || v != 1 {
		t.Fatalf("Choose = %d, %v", v, err)
	}
}

// TestOrdering sends 10,000 messages that mix Broadcast, Call and sliced
// Broadcast to 8 actors in 4 procs: each actor must see exactly the
// messages addressed to it, in send order.
func TestOrdering(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"procs", 4}})
	rec, err := actorrt.SpawnPerProc[Recorder](ctx, procs, "ordering", actorrt.Dims{{"actors", 2}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Extent().NumRanks() != 8 {
		t.Fatalf("extent %v", rec.Extent())
	}
	const n = 10000
	want := make([][]int64, 8)
	var calls []*actorrt.Future[actorrt.ValueMesh[int64]]
	for i := int64(0); i < n; i++ {
		// The target, and the ranks (procs*2 + actors) it holds, worked out
		// here independently of the runtime's own geometry.
		var target *actorrt.ActorMesh[Recorder]
		var members []int
		box := func(p0, p1, a0, a1 int) {
			for p := p0; p < p1; p++ {
				for a := a0; a < a1; a++ {
					members = append(members, p*2+a)
				}
			}
		}
		switch i % 5 {
		case 0, 1: // the whole mesh
			target = rec
			box(0, 4, 0, 2)
		case 2: // some procs
			p := int(i/5) % 3
			target = rec.Slice("procs", p, 4)
			box(p, 4, 0, 2)
		case 3: // one actor on every proc
			a := int(i/5) % 2
			target = rec.At("actors", a)
			box(0, 4, a, a+1)
		case 4: // a single actor
			p, a := int(i/5)%4, int(i/7)%2
			target = rec.At("procs", p).At("actors", a)
			box(p, p+1, a, a+1)
		}
		for _, r := range members {
			want[r] = append(want[r], i)
		}
		if i%10 == 4 {
			calls = append(calls, actorrt.Method1((*Recorder).NoteCall).Call(target, i))
		} else if err := actorrt.VoidMethod1((*Recorder).Note).Broadcast(target, i); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range calls {
		if _, err := c.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seen, err := actorrt.Method((*Recorder).Seen).Call(rec).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for r, got := range seen.Values() {
		total += len(got)
		if !reflect.DeepEqual(got, want[r]) {
			t.Errorf("actor %d: got %d messages, want %d; first difference at %d", r, len(got), len(want[r]), firstDiff(got, want[r]))
		}
	}
	t.Logf("%d messages sent, %d deliveries checked", n, total)
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestActorsOfAProcRunConcurrently: Wait blocks until Open runs in another
// actor of the same proc.
func TestActorsOfAProcRunConcurrently(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	a := spawn[Gate](t, actorrt.ThisProc(ctx), "gate-a")
	b := spawn[Gate](t, actorrt.ThisProc(ctx), "gate-b")
	waiting := actorrt.Method((*Gate).Wait).CallOne(a)
	if _, err := actorrt.VoidMethod((*Gate).Open).CallOne(b).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := waiting.Get(ctx); err != nil || !ok {
		t.Fatalf("Wait = %v, %v: the gate did not open while another actor was busy", ok, err)
	}
}

// TestOneMessageAtATime: many concurrent calls to one actor never overlap.
func TestOneMessageAtATime(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	s := spawn[Sleeper](t, actorrt.ThisProc(ctx), "sleeper")
	var futs []*actorrt.Future[actorrt.Void]
	for i := 0; i < 50; i++ {
		futs = append(futs, actorrt.VoidMethod((*Sleeper).Nap).CallOne(s))
	}
	for _, f := range futs {
		if _, err := f.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if max, _ := actorrt.Method((*Sleeper).Max).CallOne(s).Get(ctx); max != 1 {
		t.Fatalf("%d messages ran at once in one actor", max)
	}
}

// TestLargeArgument sends 20 MiB, more than the bus takes in one message.
func TestLargeArgument(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	echo := spawn[Echo](t, procs, "digest")
	big := bytes.Repeat([]byte("monarch!"), 20<<20/8)
	big[len(big)-1] = '?'
	sum, err := actorrt.Method1((*Echo).Digest).CallOne(echo, big).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum != sha256.Sum256(big) {
		t.Fatal("digest of the 20 MiB argument differs")
	}
	back, err := actorrt.Method1((*Echo).Bytes).CallOne(echo, big).Get(ctx)
	if err != nil || !bytes.Equal(back, big) {
		t.Fatalf("the 20 MiB argument came back as %d bytes: %v", len(back), err)
	}
}

// TestLargeArgumentToSeveral: a large []byte argument may share the
// received message, but only where one actor receives it: two members in
// one proc each get bytes of their own, which they may change.
func TestLargeArgumentToSeveral(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	echo, err := actorrt.SpawnPerProc[Echo](ctx, procs, "scribblers", actorrt.Dims{{"actors", 2}})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{3}, 1<<20)
	sums, err := actorrt.Method1((*Echo).Scribble).Call(echo, big).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sums.Values() {
		if s != 3<<20 {
			t.Errorf("member %d summed %d, want %d: it saw the other's writes", i, s, 3<<20)
		}
	}
}

func TestEndpointErrors(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	echo := spawn[Echo](t, actorrt.ThisProc(ctx), "errors")
	_, err := actorrt.VoidMethod1((*Echo).Fail).CallOne(echo, "no thanks").Get(ctx)
	var ae *actorrt.ActorError
	if !errors.As(err, &ae) || ae.Endpoint != "Fail" || ae.Message != "no thanks" || ae.ActorID != "errors[0]" {
		t.Fatalf("err = %#v", err)
	}
	_, err = actorrt.VoidMethod((*Echo).Panic).CallOne(echo).Get(ctx)
	if !errors.Is(err, actorrt.ErrPanic) || !errors.As(err, &ae) || !strings.Contains(ae.Stack, "Panic") {
		t.Fatalf("panic err = %v", err)
	}
	// The actor lives on.
	if v, err := actorrt.Method((*Echo).Ping).CallOne(echo).Get(ctx); err != nil || v != 1 {
		t.Fatalf("after errors: %d, %v", v, err)
	}
}
