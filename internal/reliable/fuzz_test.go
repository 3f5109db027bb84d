package reliable

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"
)

// FuzzInbox feeds an inbox with small bounds any sequence of frames, tail
// markers, "missing" answers, ticks, link drops and verdicts on senders,
// from a few senders on a few subjects (some it does not receive), some
// members of the job, some strangers, some not known, with any numbers
// and fences. Whatever comes, it must not panic, must stay within its
// bounds, per sender and subject every number is delivered or said lost
// at most once, in order, and only a member's answer for numbers it was
// asked for makes any lost.
func FuzzInbox(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1})
	f.Add([]byte{0, 1, 0, 5, 2, 1, 9, 0, 2, 1, 0, 3, 0, 0, 3, 1, 1, 0, 1, 2, 4, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 3, 1, 200, 0, 0, 0, 0, 3, 3, 1, 1, 4, 0, 0, 0, 5, 0, 0, 0, 4, 255, 255, 255})
	// A stranger's run numbered 1, another numbered 3, its "no longer
	// held" for 2: nothing lost. Then a member's frame and tail past
	// Ahead: refused.
	f.Add([]byte{0, 3, 0, 0, 0, 3, 2, 0, 3, 3, 2, 0, 0, 0, 0, 0, 0, 0, 200, 0, 2, 0, 250, 0})
	// An unknown sender delivered from, asked about, judged a member,
	// then its gap and answer.
	f.Add([]byte{0, 2, 0, 0, 7, 2, 1, 0, 0, 2, 3, 0, 3, 2, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := InLimits{HeldPerSender: 40, Held: 60, Senders: 3, Strangers: 2, GiveUp: 5 * time.Second, Ahead: 40}
		standings := map[string]Standing{"a": Member, "b": Member, "c": Unknown, "d": Stranger, "e": Unknown}
		in := NewInbox(lim, func(from string) Standing { return standings[from] })
		in.Subscribe("proc.r")
		in.Subscribe("mesh.m")
		keys := []string{"proc.r", "mesh.m", "mesh.x"}
		froms := []string{"a", "b", "c", "d", "e"}
		now := time.Unix(0, 0)
		type sk struct{ from, key string }
		next := map[sk]uint64{} // the last number delivered per stream
		// Per stream, the numbers delivered or said lost so far, as
		// sorted, joined ranges.
		done := map[sk][]Range{}
		asked := map[sk]uint64{} // the highest number asked for per stream
		account := func(k sk, r Range) {
			rs := done[k]
			for _, x := range rs {
				if r.Lo <= x.Hi && x.Lo <= r.Hi {
					t.Fatalf("%s on %s: %d..%d delivered or lost twice (have %v)", k.from, k.key, r.Lo, r.Hi, rs)
				}
			}
			rs = append(rs, r)
			slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.Lo, b.Lo) })
			out := rs[:1]
			for _, x := range rs[1:] {
				if p := &out[len(out)-1]; x.Lo == p.Hi+1 {
					p.Hi = x.Hi
				} else {
					out = append(out, x)
				}
			}
			done[k] = out
		}
		check := func(e Effects) {
			for _, n := range e.Naks {
				k := sk{n.To, n.Key}
				asked[k] = max(asked[k], n.Hi)
			}
			for _, l := range e.Lost {
				if l.Hi < l.Lo || l.Lo == 0 {
					t.Fatalf("lost %d..%d", l.Lo, l.Hi)
				}
				if s := in.senders[l.From]; s == nil || s.standing != Member {
					t.Fatalf("%s on %s: %d..%d lost on the word of a sender not a member", l.From, l.Key, l.Lo, l.Hi)
				}
				if l.Hi > asked[sk{l.From, l.Key}] {
					t.Fatalf("%s on %s: %d..%d lost, never asked past %d", l.From, l.Key, l.Lo, l.Hi, asked[sk{l.From, l.Key}])
				}
				account(sk{l.From, l.Key}, Range{l.Lo, l.Hi})
			}
			// What is delivered comes in order, and only once everything
			// before it was delivered or said lost.
			for _, m := range e.Deliver {
				k := sk{m.From, m.Key}
				lo := m.Seq + uint64(m.Skip)
				if m.Skip >= max(m.N, 1) || lo <= next[k] && next[k] > 0 {
					t.Fatalf("%s on %s: delivered from %d (frame %d+%d, skip %d) after %d", m.From, m.Key, lo, m.Seq, m.N, m.Skip, next[k])
				}
				if lo > 1 && (len(done[k]) == 0 || done[k][0].Lo != 1 || done[k][0].Hi < lo-1) {
					t.Fatalf("%s on %s: delivered from %d with %v accounted for before it", m.From, m.Key, lo, done[k])
				}
				account(k, Range{lo, m.last()})
				next[k] = m.last()
			}
			for _, d := range e.Dropped {
				for k := range done {
					if k.from == d.From && in.senders[d.From] == nil {
						delete(next, k) // forgotten: it starts again
						delete(done, k)
					}
				}
			}
			if in.held > lim.Held || len(in.senders) > lim.Senders || in.Strangers() > lim.Strangers {
				t.Fatalf("past the bounds: held %d, senders %d (strangers %d)", in.held, len(in.senders), in.Strangers())
			}
		}
		forgotten := func(from string) { // it starts again
			for k := range done {
				if k.from == from {
					delete(next, k)
					delete(done, k)
				}
			}
		}
		for len(data) >= 4 {
			op, a, b, c := data[0], data[1], data[2], data[3]
			data = data[4:]
			from, key := froms[int(a)%len(froms)], keys[int(a>>4)%len(keys)]
			switch op % 8 {
			case 0, 1:
				m := Msg{From: from, Key: key, Seq: uint64(b%32) + 1, N: int(c%4) + 1, Size: int(c >> 2 % 32), Payload: nil}
				if op >= 0x80 {
					m.Fences = []Fence{{keys[int(c)%len(keys)], uint64(b >> 3)}}
				}
				check(in.Receive(m, now))
			case 2:
				check(in.Tail(from, key, uint64(b), now))
			case 3:
				check(in.Missing(from, key, uint64(b), uint64(b)+uint64(c%8), now))
			case 4:
				now = now.Add(time.Duration(b) * 50 * time.Millisecond)
				check(in.Tick(now))
				in.Acks(now)
				in.DueAcks()
			case 5:
				check(in.LinkUp(now))
			case 7:
				in.Judged(from, Standing(b%3))
				if in.senders[from] == nil {
					forgotten(from)
				}
			case 6:
				in.Forget(from)
				forgotten(from)
			}
		}
		_ = fmt.Sprint(in.Senders())
	})
}
