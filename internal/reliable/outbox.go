package reliable

import "time"

// Subject is a destination as the scheme sees it: a proc's own subject
// (Proc set) or a group's (Group set: the procs that receive it).
type Subject struct {
	Key   string          // short and unique: what fences and NAKs name it by
	Proc  string          // a proc's subject: that proc
	Group map[string]bool // a group's subject: its procs
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

// Fence says: before this message, the sender's messages on Key up to Seq.
type Fence struct {
	Key string `msgpack:"k"`
	Seq uint64 `msgpack:"s"`
}

// Limits bound what an Outbox keeps to resend.
type Limits struct {
	Retain   time.Duration // how long a message is kept
	MaxBytes int           // at most this many bytes of messages in all
}

// TailDelays are when, after its last message, a quiet subject gets a
// tail marker (its last sequence number), so that a receiver that lost
// the last messages finds out. Several, since a marker can be lost too.
var TailDelays = [...]time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}

// Outbox is a sender's side: sequence numbers and fences for what it
// publishes, the history it resends from, and the tail markers it owes.
type Outbox struct {
	limits   Limits
	subjects map[string]*outSubject
	clock    uint64 // counts the messages stamped
	// The subjects by last use, most recent first: proc subjects and
	// group subjects apart, since a proc subject's fences can only be on
	// groups.
	procs, groups recentList
	// history holds the messages kept, oldest first, across subjects.
	history []*kept
	head    int // history[head:] is live
	bytes   int
	tails   map[*outSubject]bool // subjects owing tail markers
}

type outSubject struct {
	subj       *Subject
	seq        uint64
	lastUse    uint64 // the clock at its last message
	prev, next *outSubject
	kept       []*kept // what history holds of this subject, in sequence order
	tailStage  int
	lastSent   time.Time
}

type kept struct {
	subj  *outSubject
	seq   uint64
	at    time.Time
	frame []byte
}

// NewOutbox makes an empty outbox.
func NewOutbox(l Limits) *Outbox {
	return &Outbox{limits: l, subjects: map[string]*outSubject{}, tails: map[*outSubject]bool{}}
}

// Stamp assigns the next message on s its sequence number and fences.
// The message must then be recorded with Keep (once encoded).
func (o *Outbox) Stamp(s *Subject, now time.Time) (seq uint64, fences []Fence) {
	os := o.subjects[s.Key]
	if os == nil {
		os = &outSubject{subj: s}
		o.subjects[s.Key] = os
	}
	// Fences: the subjects used since os's last message that share a
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
	os.seq++
	os.lastUse = o.clock
	os.lastSent = now
	os.tailStage = 0
	o.tails[os] = true
	if s.Proc != "" {
		o.procs.moveToFront(os)
	} else {
		o.groups.moveToFront(os)
	}
	return os.seq, fences
}

// Keep records a stamped message (its whole frame, copied) for resending,
// and drops what is past the limits.
func (o *Outbox) Keep(key string, seq uint64, frame []byte, now time.Time) {
	os := o.subjects[key]
	if os == nil {
		return
	}
	k := &kept{subj: os, seq: seq, at: now, frame: append([]byte(nil), frame...)}
	o.history = append(o.history, k)
	os.kept = append(os.kept, k)
	o.bytes += len(k.frame)
	o.expire(now)
}

// expire drops kept messages older than Retain, or past MaxBytes, oldest
// first (a subject's kept messages are in sequence order, and leave from
// the front as they leave the history).
func (o *Outbox) expire(now time.Time) {
	for o.head < len(o.history) {
		k := o.history[o.head]
		if o.bytes <= o.limits.MaxBytes && now.Sub(k.at) <= o.limits.Retain {
			break
		}
		o.bytes -= len(k.frame)
		if os := k.subj; len(os.kept) > 0 && os.kept[0] == k {
			os.kept[0] = nil
			os.kept = os.kept[1:]
		}
		o.history[o.head] = nil
		o.head++
	}
	// Compact once most of the slice is dead.
	if o.head > 1024 && o.head*2 > len(o.history) {
		o.history = append(o.history[:0:0], o.history[o.head:]...)
		o.head = 0
	}
}

// Resend returns the kept frames on key with sequence numbers from..upto,
// in order, and missing: the first sequence number of the range it no
// longer holds the start of (0: it holds all). A receiver asked for them.
func (o *Outbox) Resend(key string, from, upto uint64) (frames [][]byte, missingUpto uint64) {
	os := o.subjects[key]
	if os == nil {
		return nil, upto
	}
	upto = min(upto, os.seq)
	if from > upto {
		return nil, 0
	}
	if len(os.kept) == 0 || from < os.kept[0].seq {
		first := upto + 1
		if len(os.kept) > 0 {
			first = os.kept[0].seq
		}
		missingUpto = min(upto, first-1)
		from = missingUpto + 1
	}
	for _, k := range os.kept {
		if k.seq >= from && k.seq <= upto {
			frames = append(frames, k.frame)
		}
	}
	return frames, missingUpto
}

// Tick drops what has aged out and returns the tail markers due: for
// each subject quiet for TailDelays[i] since its last message, its key
// and last sequence number.
func (o *Outbox) Tick(now time.Time) []Fence {
	o.expire(now)
	var due []Fence
	for os := range o.tails {
		if now.Sub(os.lastSent) < TailDelays[os.tailStage] {
			continue
		}
		due = append(due, Fence{os.subj.Key, os.seq})
		if os.tailStage++; os.tailStage == len(TailDelays) {
			delete(o.tails, os)
		}
	}
	return due
}

// Forget drops everything about subjects whose receivers are gone (a
// proc that ended): keys.
func (o *Outbox) Forget(key string) {
	os := o.subjects[key]
	if os == nil {
		return
	}
	delete(o.tails, os)
	if os.subj.Proc != "" {
		o.procs.remove(os)
	} else {
		o.groups.remove(os)
	}
	delete(o.subjects, key)
	// Its kept messages age out of history with the rest.
}

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
