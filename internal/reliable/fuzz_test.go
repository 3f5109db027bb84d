package reliable

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"
)

// FuzzInbox feeds an inbox with small bounds any sequence of frames, tail
// markers, "missing" answers, ticks and link drops, from a few senders on
// a few subjects (some it does not receive), with any numbers and fences.
// Whatever comes, it must not panic, must stay within its bounds, and per
// sender and subject every number is delivered or said lost at most once,
// in order.
func FuzzInbox(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1})
	f.Add([]byte{0, 1, 0, 5, 2, 1, 9, 0, 2, 1, 0, 3, 0, 0, 3, 1, 1, 0, 1, 2, 4, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 3, 1, 200, 0, 0, 0, 0, 3, 3, 1, 1, 4, 0, 0, 0, 5, 0, 0, 0, 4, 255, 255, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := InLimits{HeldPerSender: 40, Held: 60, Senders: 3, Unconfirmed: 2, GiveUp: 5 * time.Second}
		in := NewInbox(lim)
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
			for _, l := range e.Lost {
				if l.Hi < l.Lo || l.Lo == 0 {
					t.Fatalf("lost %d..%d", l.Lo, l.Hi)
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
			if in.held > lim.Held || len(in.senders) > lim.Senders || in.unconfirmed.Len() > lim.Unconfirmed {
				t.Fatalf("past the bounds: held %d, senders %d (unconfirmed %d)", in.held, len(in.senders), in.unconfirmed.Len())
			}
		}
		for len(data) >= 4 {
			op, a, b, c := data[0], data[1], data[2], data[3]
			data = data[4:]
			from, key := froms[int(a)%len(froms)], keys[int(a>>4)%len(keys)]
			switch op % 7 {
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
			case 6:
				in.Forget(from)
				for k := range done {
					if k.from == from {
						delete(next, k)
						delete(done, k)
					}
				}
			}
		}
		_ = fmt.Sprint(in.Senders())
	})
}
