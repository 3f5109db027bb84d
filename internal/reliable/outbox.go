package reliable

import (
	"bytes"
	"sort"
	"strings"
	"time"
)

// Subject is a destination as the scheme sees it: a proc's own subject
// (Proc set) or a group's (Group set: the procs that receive it).
type Subject struct {
	Key   string          // short and unique: what fences and NAKs name it by
	Proc  string          // a proc's subject: that proc
	Group map[string]bool // a group's subject: its procs

	// out is its state in the outbox that last used it: found without a
	// map lookup per message.
	out *outSubject
}

// shares reports whether s and t may have a receiver in common.
func (s *Subject) shares(t *Subject) bool {
	switch {
	case s.Proc != "" && t.Proc != "":
		return s.Proc == t.Proc
	case s.Proc != "":
		return t.Group[s.Proc]
	case t.Proc != "":
		return s.Group[t.Proc]
	}
	return true // two groups: not worth the intersection
}

// receives reports whether proc is a receiver of s.
func (s *Subject) receives(proc string) bool {
	if s.Proc != "" {
		return s.Proc == proc
	}
	return s.Group[proc]
}

// Fence says: before this message, the sender's messages on Key up to Seq.
type Fence struct {
	Key string `msgpack:"k"`
	Seq uint64 `msgpack:"s"`
}

// Range is the numbers Lo..Hi, both included.
type Range struct{ Lo, Hi uint64 }

// Limits bound what an Outbox keeps to resend.
type Limits struct {
	Retain   time.Duration // how long a frame is kept
	MaxBytes int           // at most this many bytes of frames in all
}

// Kept reports whether a frame of n bytes is kept to resend: those past a
// tenth of MaxBytes are not (a lost one is given up on at once), so that
// one large frame does not push out everything else.
func (l Limits) Kept(n int) bool { return n <= l.MaxBytes/10 }

// TailDelays are when, after its last message, a quiet subject gets a
// tail marker (its last sequence number), so that a receiver that lost
// the last messages finds out. Several, since a marker can be lost too,
// the last one past a host timeout's outage (an outage longer than that
// is a failure).
var TailDelays = [...]time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second, 6 * time.Second, 10 * time.Second}

// Outbox is a sender's side: sequence numbers and fences for what it
// publishes, the history it resends from, and the tail markers it owes.
type Outbox struct {
	limits   Limits
	subjects map[string]*outSubject
	clock    uint64 // counts the frames stamped
	// The subjects by last use, most recent first: proc subjects and
	// group subjects apart, since a proc subject's fences can only be on
	// groups.
	procs, groups recentList
	history       history
	bytes         int                  // of the kept frames not yet acknowledged
	byID          []*outSubject        // subjects by id (nil once forgotten)
	tails         map[*outSubject]bool // subjects owing tail markers
}

type outSubject struct {
	owner      *Outbox // nil once forgotten
	subj       *Subject
	id         uint32
	seq        uint64 // the last number given out
	lastUse    uint64 // the clock at its last frame
	prev, next *outSubject
	kept       []uint64 // the history numbers of this subject's kept frames, in sequence order
	tailStage  int
	owesTail   bool // in tails
	lastSent   time.Time
	// What its receivers acknowledged: a proc subject's one receiver's
	// number (acked), a group's by member (acks), their least (acked,
	// worked out at Tick when stale).
	acked    uint64
	acks     map[string]uint64
	ackStale bool
	gone     map[string]bool // members of a group that ended: they ack no more
}

// NewOutbox makes an empty outbox.
func NewOutbox(l Limits) *Outbox {
	return &Outbox{limits: l, subjects: map[string]*outSubject{}, tails: map[*outSubject]bool{}}
}

// Stamp numbers the next frame on s, of n messages (a run; at least 1):
// it returns the first of its numbers, first..first+n-1, and its fences.
// The frame must then be recorded with Keep (once encoded).
func (o *Outbox) Stamp(s *Subject, n int, now time.Time) (first uint64, fences []Fence) {
	os := o.state(s)
	if os == nil {
		os = &outSubject{owner: o, subj: s, id: uint32(len(o.byID))}
		o.subjects[s.Key] = os
		o.byID = append(o.byID, os)
		s.out = os
	}
	// Fences: the subjects used since os's last frame that share a
	// receiver with it. Groups first (they can share with anything), then
	// procs (only for a group).
	for x := o.groups.head; x != nil && x.lastUse > os.lastUse; x = x.next {
		if x != os && x.subj.shares(s) {
			fences = append(fences, Fence{x.subj.Key, x.seq})
		}
	}
	if s.Proc == "" {
		for x := o.procs.head; x != nil && x.lastUse > os.lastUse; x = x.next {
			if x.subj.shares(s) {
				fences = append(fences, Fence{x.subj.Key, x.seq})
			}
		}
	}
	o.clock++
	first = os.seq + 1
	os.seq += uint64(max(n, 1))
	os.lastUse = o.clock
	os.lastSent = now
	os.tailStage = 0
	if !os.owesTail {
		os.owesTail = true
		o.tails[os] = true
	}
	if s.Proc != "" {
		o.procs.moveToFront(os)
	} else {
		o.groups.moveToFront(os)
	}
	return first, fences
}

// Keep records a stamped frame of n messages numbered from first (its
// whole bytes, given as parts to be joined, copied) for resending, and
// drops what is past the limits.
func (o *Outbox) Keep(s *Subject, first uint64, n int, parts [][]byte, now time.Time) {
	os := o.state(s)
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	if os == nil || !o.limits.Kept(size) {
		return
	}
	os.kept = append(os.kept, o.history.push(first, uint32(max(n, 1)), now.UnixNano(), os.id, parts))
	o.bytes += size
	o.expire(now)
}

// state is s's state in o; nil if it has none.
func (o *Outbox) state(s *Subject) *outSubject {
	if os := s.out; os != nil && os.owner == o {
		return os
	}
	os := o.subjects[s.Key]
	if os != nil {
		s.out = os
	}
	return os
}

// expire drops kept frames older than Retain, or past the bounds, oldest
// first (a subject's kept frames are in sequence order, and leave from
// the front as they leave the history). Past the front, acknowledged
// frames free no memory until the front goes too: their slabs count
// against twice MaxBytes.
func (o *Outbox) expire(now time.Time) {
	h := &o.history
	oldest := now.Add(-o.limits.Retain).UnixNano()
	for k := h.front(); k != nil; k = h.front() {
		if !k.acked && o.bytes <= o.limits.MaxBytes && h.slabMem <= 2*o.limits.MaxBytes && h.n <= maxKept && k.at >= oldest {
			break
		}
		if !k.acked {
			o.bytes -= int(k.size)
		}
		if os := o.byID[k.subj]; os != nil && len(os.kept) > 0 && os.kept[0] == h.base {
			os.kept = os.kept[1:]
		}
		h.pop()
	}
}

// Answer is a sender's answer to a NAK: the kept frames that hold what
// was asked for, in order (copies), and the numbers asked for that it no
// longer holds. Numbers the asker acknowledged are in neither: it has
// them, whatever order its acknowledgement and its NAK came in.
type Answer struct {
	Frames  [][]byte
	Missing []Range
}

// Nak answers receiver from's NAK for the numbers lo..hi on key, at most
// MaxNakSpan of them, however many a NAK off the wire names. A NAK from a
// proc that is not one of key's receivers, or for a subject this outbox
// never sent on, gets no answer.
func (o *Outbox) Nak(from, key string, lo, hi uint64) Answer {
	os := o.subjects[key]
	if os == nil || !os.subj.receives(from) {
		return Answer{}
	}
	acked := os.acked
	if a := os.acks[from]; a > acked {
		acked = a
	}
	lo = max(lo, acked+1)
	hi = min(hi, os.seq)
	if lo > hi {
		return Answer{}
	}
	hi = min(hi, lo+MaxNakSpan-1)
	var a Answer
	h := &o.history
	i := sort.Search(len(os.kept), func(i int) bool { return h.at(os.kept[i]).last() >= lo })
	next := lo // the first number not yet answered
	for ; i < len(os.kept) && next <= hi; i++ {
		k := h.at(os.kept[i])
		if k.seq > hi {
			break
		}
		if k.seq > next {
			a.Missing = append(a.Missing, Range{next, k.seq - 1})
		}
		if !k.acked {
			// A copy: the slab is reused once the frame leaves.
			a.Frames = append(a.Frames, bytes.Clone(h.frame(k)))
		}
		next = k.last() + 1
	}
	if next <= hi {
		a.Missing = append(a.Missing, Range{next, hi})
	}
	return a
}

// Tick drops what has aged out and returns the tail markers due: for
// each subject quiet for TailDelays[i] since its last frame, its key and
// last sequence number.
func (o *Outbox) Tick(now time.Time) []Fence {
	o.expire(now)
	o.history.shrink()
	var due []Fence
	for os := range o.tails {
		if os.ackStale {
			o.settleAcks(os)
		}
		if os.acked >= os.seq {
			o.paidTails(os) // its receivers have it all
			continue
		}
		if now.Sub(os.lastSent) < TailDelays[os.tailStage] {
			continue
		}
		due = append(due, Fence{os.subj.Key, os.seq})
		if os.tailStage++; os.tailStage == len(TailDelays) {
			o.paidTails(os)
		}
	}
	return due
}

// LinkUp says the link came back after a drop: every subject whose
// receivers have not acknowledged everything gets a tail marker now (what
// was lost while it was down is found at once, not at the next delay),
// and its schedule of markers starts again.
func (o *Outbox) LinkUp(now time.Time) []Fence {
	var due []Fence
	for _, os := range o.subjects {
		if os.ackStale {
			o.settleAcks(os)
		}
		if os.acked >= os.seq {
			continue
		}
		due = append(due, Fence{os.subj.Key, os.seq})
		os.lastSent, os.tailStage = now, 0
		if !os.owesTail {
			os.owesTail = true
			o.tails[os] = true
		}
	}
	return due
}

// paidTails says os owes no more tail markers.
func (o *Outbox) paidTails(os *outSubject) {
	delete(o.tails, os)
	os.owesTail = false
}

// Ack takes a receiver's acknowledgement: it has every message on key up
// to seq. What all the subject's receivers have is not kept any more. An
// acknowledgement from a proc that is not a receiver of key, or past the
// last number given out, is ignored.
func (o *Outbox) Ack(from, key string, seq uint64) {
	os := o.subjects[key]
	if os == nil || seq > os.seq {
		return
	}
	if os.subj.Proc != "" {
		if from == os.subj.Proc && seq > os.acked {
			os.acked = seq
			o.release(os)
		}
		return
	}
	if !os.subj.Group[from] {
		return
	}
	if os.acks == nil {
		os.acks = map[string]uint64{}
	}
	if seq > os.acks[from] {
		if _, ok := os.acks[from]; !ok {
			from = strings.Clone(from) // from may alias a received buffer
		}
		os.acks[from] = seq
		os.ackStale = true
	}
}

// settleAcks works out what every receiver of a group has, and releases
// it. It costs the group's size: done at Tick, not per acknowledgement.
func (o *Outbox) settleAcks(os *outSubject) {
	os.ackStale = false
	least := os.seq
	for p := range os.subj.Group {
		if os.gone[p] {
			continue
		}
		least = min(least, os.acks[p])
	}
	if least > os.acked {
		os.acked = least
		o.release(os)
	}
}

// release drops the kept frames of os its receivers acknowledged.
func (o *Outbox) release(os *outSubject) {
	for len(os.kept) > 0 {
		k := o.history.at(os.kept[0])
		if k.last() > os.acked {
			break
		}
		if !k.acked {
			o.bytes -= int(k.size)
			k.acked = true
		}
		os.kept = os.kept[1:]
	}
}

// ProcGone says a proc ended: it acknowledges nothing more, so groups no
// longer wait for it.
func (o *Outbox) ProcGone(proc string) {
	for x := o.groups.head; x != nil; x = x.next {
		if x.subj.Group[proc] {
			if x.gone == nil {
				x.gone = map[string]bool{}
			}
			x.gone[proc] = true
			x.ackStale = true
		}
	}
}

// Forget drops everything about a subject whose receivers are gone (a
// proc that ended).
func (o *Outbox) Forget(key string) {
	os := o.subjects[key]
	if os == nil {
		return
	}
	o.paidTails(os)
	if os.subj.Proc != "" {
		o.procs.remove(os)
	} else {
		o.groups.remove(os)
	}
	delete(o.subjects, key)
	o.byID[os.id] = nil
	os.owner = nil
	// Its kept frames free their bytes now; their slabs age out of
	// history with the rest.
	for _, num := range os.kept {
		if k := o.history.at(num); !k.acked {
			o.bytes -= int(k.size)
			k.acked = true
		}
	}
	os.kept = nil
}

// Holding reports the bytes kept and not yet acknowledged.
func (o *Outbox) Holding() int { return o.bytes }

// recentList is a doubly linked list of subjects, most recently used
// first.
type recentList struct{ head *outSubject }

func (l *recentList) moveToFront(s *outSubject) {
	if l.head == s {
		return
	}
	l.remove(s)
	s.next = l.head
	if l.head != nil {
		l.head.prev = s
	}
	l.head = s
}

func (l *recentList) remove(s *outSubject) {
	if s.prev != nil {
		s.prev.next = s.next
	} else if l.head == s {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
}
