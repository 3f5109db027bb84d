package reliable

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// world is one sender and some receivers joined by links that lose,
// duplicate and delay messages; it checks that every receiver delivers
// exactly what was sent to it, in send order. Frames hold runs of one to
// four messages.
type world struct {
	t        *testing.T
	rng      *rand.Rand
	now      time.Time
	out      *Outbox
	subjects []*Subject
	ins      map[string]*Inbox
	queues   map[string][]Msg // per receiver, what is on the wire to it, in order
	sentTo   map[string][]int // per receiver, the ids sent to it, in order
	got      map[string][]int // per receiver, the ids delivered, in order
	frames   map[string]Msg   // "key/first" -> the frame as sent (its payload: the ids)
	lossy    func() bool      // whether the link loses the next message
	lost     int
	nextID   int
	missed   map[string]int // per receiver, messages given up on (the sender no longer held them)
}

func newWorld(t *testing.T, seed uint64, limits Limits) *world {
	w := &world{t: t, rng: rand.New(rand.NewPCG(seed, 1)), now: time.Unix(0, 0), out: NewOutbox(limits),
		ins: map[string]*Inbox{}, queues: map[string][]Msg{}, sentTo: map[string][]int{}, got: map[string][]int{},
		frames: map[string]Msg{}, missed: map[string]int{}}
	procs := []string{"r1", "r2", "r3"}
	lim := DefaultInLimits
	lim.GiveUp = time.Hour
	for _, p := range procs {
		w.subjects = append(w.subjects, &Subject{Key: "proc." + p, Proc: p})
		w.ins[p] = NewInbox(lim, nil)
		w.ins[p].Subscribe("proc." + p)
	}
	groups := map[string][]string{"g12": {"r1", "r2"}, "g23": {"r2", "r3"}, "g123": procs, "g1": {"r1"}}
	for _, name := range []string{"g12", "g23", "g123", "g1"} {
		g := &Subject{Key: "mesh." + name, Group: map[string]bool{}}
		for _, p := range groups[name] {
			g.Group[p] = true
			w.ins[p].Subscribe(g.Key)
		}
		w.subjects = append(w.subjects, g)
	}
	return w
}

func (w *world) receivers(s *Subject) []string {
	if s.Proc != "" {
		return []string{s.Proc}
	}
	var rs []string
	for p := range s.Group {
		rs = append(rs, p)
	}
	slices.Sort(rs)
	return rs
}

// send publishes a frame of n messages on s.
func (w *world) send(s *Subject, n int) {
	first, fences := w.out.Stamp(s, n, w.now)
	var ids []int
	for range n {
		ids = append(ids, w.nextID)
		w.nextID++
	}
	name := fmt.Sprintf("%s/%d", s.Key, first)
	w.out.Keep(s, first, n, [][]byte{[]byte(name)}, w.now)
	m := Msg{From: "s", Key: s.Key, Seq: first, N: n, Fences: fences, Size: 1, Payload: ids}
	w.frames[name] = m
	for _, r := range w.receivers(s) {
		w.sentTo[r] = append(w.sentTo[r], ids...)
		w.wire(r, m)
	}
}

// wire puts m on the link to r: maybe lost, maybe twice.
func (w *world) wire(r string, m Msg) {
	if w.lossy() {
		w.lost++
		return
	}
	w.queues[r] = append(w.queues[r], m)
	if w.rng.IntN(50) == 0 {
		w.queues[r] = append(w.queues[r], m)
	}
}

// step delivers what is on the wire to every receiver, answers NAKs from
// the outbox, and moves the clock. Acknowledgements reach the outbox
// before the NAKs of the same step, as they may on a real link.
func (w *world) step(d time.Duration) {
	w.now = w.now.Add(d)
	for _, r := range []string{"r1", "r2", "r3"} {
		in := w.ins[r]
		q := w.queues[r]
		w.queues[r] = nil
		var naks []Nak
		for _, m := range q {
			naks = append(naks, w.take(r, in.Receive(m, w.now))...)
		}
		naks = append(naks, w.take(r, in.Tick(w.now))...)
		for _, a := range in.Acks(w.now) {
			if !w.lossy() {
				w.out.Ack(r, a.Key, a.Seq)
			}
		}
		w.answer(r, naks)
	}
	for _, tail := range w.out.Tick(w.now) {
		for _, r := range w.receiversOf(tail.Key) {
			if !w.lossy() {
				w.answer(r, w.take(r, w.ins[r].Tail("s", tail.Key, tail.Seq, w.now)))
			}
		}
	}
}

func (w *world) receiversOf(key string) []string {
	for _, s := range w.subjects {
		if s.Key == key {
			return w.receivers(s)
		}
	}
	return nil
}

// take records what r delivers and returns the NAKs to send.
func (w *world) take(r string, e Effects) []Nak {
	for _, m := range e.Deliver {
		w.got[r] = append(w.got[r], m.Payload.([]int)[m.Skip:]...)
	}
	for _, l := range e.Lost {
		w.missed[r] += int(l.Hi - l.Lo + 1)
	}
	if len(e.Dropped) > 0 {
		w.t.Fatalf("%s dropped %v", r, e.Dropped)
	}
	return e.Naks
}

// answer sends what each NAK asks for, again on the lossy link.
func (w *world) answer(r string, naks []Nak) {
	for _, n := range naks {
		if w.lossy() {
			continue // the NAK itself was lost: it is asked again
		}
		a := w.out.Nak(r, n.Key, n.Lo, n.Hi)
		for _, f := range a.Frames {
			// A resent frame is the same frame: its first fences.
			w.wire(r, w.frames[string(f)])
		}
		for _, m := range a.Missing {
			if !w.lossy() {
				w.answer(r, w.take(r, w.ins[r].Missing("s", n.Key, m.Lo, m.Hi, w.now)))
			}
		}
	}
}

func TestDeliveredExactlyOnceInOrder(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			w := newWorld(t, seed, Limits{Retain: time.Hour, MaxBytes: 1 << 30})
			loss := 0.05 + 0.2*w.rng.Float64()
			w.lossy = func() bool { return w.rng.Float64() < loss }
			for range 1500 {
				w.send(w.subjects[w.rng.IntN(len(w.subjects))], 1+w.rng.IntN(4)/3*w.rng.IntN(4))
				if w.rng.IntN(10) == 0 {
					w.step(10 * time.Millisecond)
				}
			}
			// The link heals: everything lost is found and resent.
			w.lossy = func() bool { return false }
			for range 1000 {
				w.step(50 * time.Millisecond)
			}
			for _, r := range []string{"r1", "r2", "r3"} {
				if !slices.Equal(w.got[r], w.sentTo[r]) || w.missed[r] != 0 {
					t.Fatalf("%s (loss %.2f, %d lost): delivered %d of %d, first difference at %d, %d given up on", r, loss, w.lost,
						len(w.got[r]), len(w.sentTo[r]), firstDiff(w.got[r], w.sentTo[r]), w.missed[r])
				}
			}
			// Every receiver acknowledged everything: nothing is kept.
			w.out.Tick(w.now)
			if w.out.Holding() != 0 {
				t.Errorf("%d bytes still kept once everything was acknowledged", w.out.Holding())
			}
		})
	}
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestLossPastTheHistory: what the sender no longer keeps is given up on,
// and said; everything else still arrives once, in order, and only what
// did not arrive is said lost.
func TestLossPastTheHistory(t *testing.T) {
	w := newWorld(t, 7, Limits{Retain: time.Hour, MaxBytes: 80})
	w.lossy = func() bool { return w.rng.Float64() < 0.3 }
	for range 400 {
		w.send(w.subjects[w.rng.IntN(len(w.subjects))], 1+w.rng.IntN(3))
	}
	w.lossy = func() bool { return false }
	for range 400 {
		w.step(50 * time.Millisecond)
	}
	abandoned := 0
	for _, r := range []string{"r1", "r2", "r3"} {
		// A subsequence of what was sent, in order, without repeats.
		j := 0
		for _, id := range w.got[r] {
			for j < len(w.sentTo[r]) && w.sentTo[r][j] != id {
				j++
			}
			if j == len(w.sentTo[r]) {
				t.Fatalf("%s delivered %d out of order or twice", r, id)
			}
			j++
		}
		if gone := len(w.sentTo[r]) - len(w.got[r]); gone != w.missed[r] {
			t.Errorf("%s: %d messages not delivered, %d said lost", r, gone, w.missed[r])
		}
		abandoned += w.missed[r]
	}
	if abandoned == 0 {
		t.Fatal("with 80 bytes of history and 30% loss, nothing was given up on: the test does not test that")
	}
	// Nothing is left waiting: every gap was either filled or given up.
	for r, in := range w.ins {
		if in.Waiting("s") {
			t.Errorf("%s still holds messages", r)
		}
	}
}

// TestFencesOnlyWhereReceiversMeet: a proc's subject is fenced by groups
// it is in, not by other procs' subjects; a group by the procs in it.
func TestFencesOnlyWhereReceiversMeet(t *testing.T) {
	o := NewOutbox(Limits{Retain: time.Hour, MaxBytes: 1 << 20})
	now := time.Unix(0, 0)
	r1 := &Subject{Key: "proc.r1", Proc: "r1"}
	r2 := &Subject{Key: "proc.r2", Proc: "r2"}
	g1 := &Subject{Key: "mesh.g1", Group: map[string]bool{"r1": true}}
	for _, s := range []*Subject{r1, r1, r2, g1, r2} {
		o.Stamp(s, 1, now)
	}
	_, f := o.Stamp(r1, 1, now)
	if !slices.Equal(f, []Fence{{"mesh.g1", 1}}) {
		t.Errorf("proc.r1 after r2, g1, r2: fences %v, want only mesh.g1", f)
	}
	_, f = o.Stamp(g1, 1, now)
	if !slices.Equal(f, []Fence{{"proc.r1", 3}}) {
		t.Errorf("mesh.g1 after r2, r1: fences %v, want only proc.r1", f)
	}
}

// TestAGapIsAskedForOnce: a message lost before a long run that arrives
// is asked for alone, not with the run held after it; asked again with
// backoff while nothing comes; and a long gap is asked for MaxNakSpan at
// a time.
func TestAGapIsAskedForOnce(t *testing.T) {
	in := NewInbox(DefaultInLimits, nil)
	in.Subscribe("k")
	t0 := time.Unix(0, 0)
	msg := func(seq uint64) Msg { return Msg{From: "s", Key: "k", Seq: seq, Size: 1} }
	var naks []Nak
	for _, seq := range []uint64{1, 3} {
		naks = append(naks, in.Receive(msg(seq), t0).Naks...)
	}
	for seq := uint64(4); seq <= 10_000; seq++ {
		naks = append(naks, in.Receive(msg(seq), t0).Naks...)
	}
	if want := []Nak{{To: "s", Key: "k", Lo: 2, Hi: 2}}; !slices.Equal(naks, want) {
		t.Fatalf("NAKs %v, want %v", naks, want)
	}
	// Asked again after 250ms, 500ms, 1s, ... while nothing comes.
	var at []time.Duration
	for d := time.Duration(0); d <= 5*time.Second; d += 50 * time.Millisecond {
		for _, n := range in.Tick(t0.Add(d)).Naks {
			if n != (Nak{To: "s", Key: "k", Lo: 2, Hi: 2}) {
				t.Fatalf("at %v: NAK %v", d, n)
			}
			at = append(at, d)
		}
	}
	want := []time.Duration{250 * time.Millisecond, 750 * time.Millisecond, 1750 * time.Millisecond, 3750 * time.Millisecond}
	if !slices.Equal(at, want) {
		t.Errorf("asked again at %v, want %v", at, want)
	}
	if got := in.Receive(msg(2), t0.Add(6*time.Second)).Deliver; len(got) != 9_999 {
		t.Errorf("the missing message freed %d, want 9,999", len(got))
	}

	// A long gap: the first MaxNakSpan numbers, then the next as they come.
	in2 := NewInbox(DefaultInLimits, nil)
	in2.Subscribe("k")
	in2.Receive(msg(1), t0)
	n := in2.Receive(msg(20_000), t0).Naks
	if want := []Nak{{To: "s", Key: "k", Lo: 2, Hi: MaxNakSpan + 1}}; !slices.Equal(n, want) {
		t.Fatalf("NAKs %v, want %v", n, want)
	}
	for seq := uint64(2); seq <= MaxNakSpan+1; seq++ {
		in2.Receive(msg(seq), t0)
	}
	if n := in2.Tick(t0.Add(300 * time.Millisecond)).Naks; len(n) != 1 || n[0].Lo != MaxNakSpan+2 || n[0].Hi != 2*MaxNakSpan+1 {
		t.Errorf("after the first span came, NAKs %v", n)
	}
}

// TestNakAnswerBounded: a NAK off the wire naming every number there is
// gets MaxNakSpan of them at most, kept or not; a NAK from a proc that is
// not a receiver of the subject gets nothing.
func TestNakAnswerBounded(t *testing.T) {
	o := NewOutbox(Limits{Retain: time.Hour, MaxBytes: 1 << 20})
	s := &Subject{Key: "proc.r", Proc: "r"}
	now := time.Unix(0, 0)
	for range 3 * MaxNakSpan {
		o.Stamp(s, 1, now) // numbered, never kept
	}
	a := o.Nak("r", "proc.r", 1, ^uint64(0))
	if len(a.Frames) != 0 || len(a.Missing) != 1 || a.Missing[0] != (Range{1, MaxNakSpan}) {
		t.Errorf("a NAK of everything: %d frames, missing %v; want missing 1..%d", len(a.Frames), a.Missing, MaxNakSpan)
	}
	if a := o.Nak("x", "proc.r", 1, 10); len(a.Frames)+len(a.Missing) != 0 {
		t.Errorf("a NAK from a proc that does not receive proc.r got %v", a)
	}
}
