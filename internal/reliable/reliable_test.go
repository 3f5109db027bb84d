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
// exactly what was sent to it, in send order.
type world struct {
	t        *testing.T
	rng      *rand.Rand
	now      time.Time
	out      *Outbox
	subjects []*Subject
	ins      map[string]*Inbox
	queues   map[string][]Msg   // per receiver, what is on the wire to it, in order
	sentTo   map[string][]int   // per receiver, the ids sent to it, in order
	got      map[string][]int   // per receiver, the ids delivered, in order
	byKeySeq map[string]int     // "key/seq" -> message id
	fencesOf map[string][]Fence // "key/seq" -> the fences the message carries
	lossy    func() bool        // whether the link loses the next message
	lost     int
}

func newWorld(t *testing.T, seed uint64, limits Limits) *world {
	w := &world{t: t, rng: rand.New(rand.NewPCG(seed, 1)), now: time.Unix(0, 0), out: NewOutbox(limits),
		ins: map[string]*Inbox{}, queues: map[string][]Msg{}, sentTo: map[string][]int{}, got: map[string][]int{},
		byKeySeq: map[string]int{}, fencesOf: map[string][]Fence{}}
	procs := []string{"r1", "r2", "r3"}
	for _, p := range procs {
		w.subjects = append(w.subjects, &Subject{Key: "proc." + p, Proc: p})
		w.ins[p] = NewInbox(1 << 30)
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

// send publishes message id on s.
func (w *world) send(id int, s *Subject) {
	seq, fences := w.out.Stamp(s, w.now)
	w.out.Keep(s, seq, [][]byte{[]byte(fmt.Sprint(id))}, w.now)
	w.byKeySeq[fmt.Sprintf("%s/%d", s.Key, seq)] = id
	w.fencesOf[fmt.Sprintf("%s/%d", s.Key, seq)] = fences
	for _, r := range w.receivers(s) {
		w.sentTo[r] = append(w.sentTo[r], id)
		w.wire(r, Msg{From: "s", Key: s.Key, Seq: seq, Fences: fences, Size: 1, Payload: id})
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
// the outbox, and moves the clock.
func (w *world) step(d time.Duration) {
	w.now = w.now.Add(d)
	for _, r := range []string{"r1", "r2", "r3"} {
		q := w.queues[r]
		w.queues[r] = nil
		for _, m := range q {
			dl, naks, overflow := w.ins[r].Receive(m, w.now)
			if overflow {
				w.t.Fatalf("%s: held past the bound", r)
			}
			w.take(r, dl)
			w.answer(r, naks)
		}
		w.answer(r, w.ins[r].Tick(w.now))
		for _, a := range w.ins[r].Acks(w.now) {
			if !w.lossy() {
				w.out.Ack(r, a.Key, a.Seq)
			}
		}
	}
	for _, tail := range w.out.Tick(w.now) {
		for _, r := range w.receiversOf(tail.Key) {
			if !w.lossy() {
				w.answer(r, w.ins[r].Tail("s", tail.Key, tail.Seq, w.now))
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

func (w *world) take(r string, dl []Msg) {
	for _, m := range dl {
		w.got[r] = append(w.got[r], m.Payload.(int))
	}
}

// answer sends what each NAK asks for, again on the lossy link.
func (w *world) answer(r string, naks []Nak) {
	for _, n := range naks {
		if w.lossy() {
			continue // the NAK itself was lost: it is asked again
		}
		frames, seqs, missing := w.out.Resend(n.Key, n.From, n.Upto)
		for _, seq := range missing {
			w.take(r, w.ins[r].Skip("s", n.Key, seq))
		}
		for i := range frames {
			seq := seqs[i]
			id := w.byKeySeq[fmt.Sprintf("%s/%d", n.Key, seq)]
			// A resent message is the same frame: its first fences.
			w.wire(r, Msg{From: "s", Key: n.Key, Seq: seq, Fences: w.fencesOf[fmt.Sprintf("%s/%d", n.Key, seq)], Size: 1, Payload: id})
		}
	}
}

func TestDeliveredExactlyOnceInOrder(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			w := newWorld(t, seed, Limits{Retain: time.Hour, MaxBytes: 1 << 30})
			loss := 0.05 + 0.2*w.rng.Float64()
			w.lossy = func() bool { return w.rng.Float64() < loss }
			for id := 0; id < 2000; id++ {
				s := w.subjects[w.rng.IntN(len(w.subjects))]
				w.send(id, s)
				if w.rng.IntN(10) == 0 {
					w.step(10 * time.Millisecond)
				}
			}
			// The link heals: everything lost is found and resent.
			w.lossy = func() bool { return false }
			for i := 0; i < 1000; i++ {
				w.step(50 * time.Millisecond)
			}
			for _, r := range []string{"r1", "r2", "r3"} {
				if !slices.Equal(w.got[r], w.sentTo[r]) {
					t.Fatalf("%s (loss %.2f, %d lost): delivered %d of %d, first difference at %d", r, loss, w.lost,
						len(w.got[r]), len(w.sentTo[r]), firstDiff(w.got[r], w.sentTo[r]))
				}
			}
			// Every receiver acknowledged everything: nothing is kept.
			w.out.Tick(w.now)
			if w.out.bytes != 0 {
				t.Errorf("%d bytes still kept once everything was acknowledged", w.out.bytes)
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
// and said; everything else still arrives once, in order.
func TestLossPastTheHistory(t *testing.T) {
	w := newWorld(t, 7, Limits{Retain: time.Hour, MaxBytes: 50})
	abandoned := 0
	w.lossy = func() bool { return w.rng.Float64() < 0.3 }
	for id := 0; id < 500; id++ {
		w.send(id, w.subjects[w.rng.IntN(len(w.subjects))])
	}
	w.lossy = func() bool { return false }
	for i := 0; i < 400; i++ {
		w.step(50 * time.Millisecond)
	}
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
		abandoned += len(w.sentTo[r]) - len(w.got[r])
	}
	if abandoned == 0 {
		t.Fatal("with 50 bytes of history and 30% loss, nothing was given up on: the test does not test that")
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
		o.Stamp(s, now)
	}
	_, f := o.Stamp(r1, now)
	if !slices.Equal(f, []Fence{{"mesh.g1", 1}}) {
		t.Errorf("proc.r1 after r2, g1, r2: fences %v, want only mesh.g1", f)
	}
	_, f = o.Stamp(g1, now)
	if !slices.Equal(f, []Fence{{"proc.r1", 3}}) {
		t.Errorf("mesh.g1 after r2, r1: fences %v, want only proc.r1", f)
	}
}

// TestAGapIsAskedForOnce: a message lost before a long run that arrives
// is asked for alone, not with the run held after it; asked again with
// backoff while nothing comes; and a long gap is asked for MaxNakSpan at
// a time.
func TestAGapIsAskedForOnce(t *testing.T) {
	in := NewInbox(1 << 30)
	in.Subscribe("k")
	t0 := time.Unix(0, 0)
	msg := func(seq uint64) Msg { return Msg{From: "s", Key: "k", Seq: seq, Size: 1} }
	var naks []Nak
	for _, seq := range []uint64{1, 3} {
		_, n, _ := in.Receive(msg(seq), t0)
		naks = append(naks, n...)
	}
	for seq := uint64(4); seq <= 10_000; seq++ {
		_, n, _ := in.Receive(msg(seq), t0)
		naks = append(naks, n...)
	}
	if want := []Nak{{To: "s", Key: "k", From: 2, Upto: 2}}; !slices.Equal(naks, want) {
		t.Fatalf("NAKs %v, want %v", naks, want)
	}
	// Asked again after 250ms, 500ms, 1s, ... while nothing comes.
	var at []time.Duration
	for d := time.Duration(0); d <= 5*time.Second; d += 50 * time.Millisecond {
		for _, n := range in.Tick(t0.Add(d)) {
			if n != (Nak{To: "s", Key: "k", From: 2, Upto: 2}) {
				t.Fatalf("at %v: NAK %v", d, n)
			}
			at = append(at, d)
		}
	}
	want := []time.Duration{250 * time.Millisecond, 750 * time.Millisecond, 1750 * time.Millisecond, 3750 * time.Millisecond}
	if !slices.Equal(at, want) {
		t.Errorf("asked again at %v, want %v", at, want)
	}
	if got, _, _ := in.Receive(msg(2), t0.Add(6*time.Second)); len(got) != 9_999 {
		t.Errorf("the missing message freed %d, want 9,999", len(got))
	}

	// A long gap: the first MaxNakSpan numbers, then the next as they come.
	in2 := NewInbox(1 << 30)
	in2.Subscribe("k")
	in2.Receive(msg(1), t0)
	_, n, _ := in2.Receive(msg(20_000), t0)
	if want := []Nak{{To: "s", Key: "k", From: 2, Upto: MaxNakSpan + 1}}; !slices.Equal(n, want) {
		t.Fatalf("NAKs %v, want %v", n, want)
	}
	for seq := uint64(2); seq <= MaxNakSpan+1; seq++ {
		in2.Receive(msg(seq), t0)
	}
	if n := in2.Tick(t0.Add(300 * time.Millisecond)); len(n) != 1 || n[0].From != MaxNakSpan+2 || n[0].Upto != 2*MaxNakSpan+1 {
		t.Errorf("after the first span came, NAKs %v", n)
	}
}

// TestResendBounded: a NAK off the wire naming every number there is gets
// MaxNakSpan of them at most, kept or not.
func TestResendBounded(t *testing.T) {
	o := NewOutbox(Limits{Retain: time.Hour, MaxBytes: 1 << 20})
	s := &Subject{Key: "proc.r", Proc: "r"}
	now := time.Unix(0, 0)
	for range 3 * MaxNakSpan {
		o.Stamp(s, now) // numbered, never kept
	}
	frames, seqs, missing := o.Resend("proc.r", 1, ^uint64(0))
	if len(frames)+len(missing) != MaxNakSpan || len(seqs) != len(frames) {
		t.Errorf("%d frames and %d missing for a NAK of everything, want %d in all", len(frames), len(missing), MaxNakSpan)
	}
}
