package reliable

import (
	"container/list"
	"fmt"
	"slices"
	"strings"
	"time"
)

// NakRetry is how long a receiver waits for what it asked for before it
// asks again; each retry waits twice as long as the one before, up to 16
// times NakRetry.
const NakRetry = 250 * time.Millisecond

// MaxNakSpan bounds the numbers one NAK asks for: a receiver that missed
// more asks for the rest as the first ones come, so that a long gap is
// never sent again whole, NakRetry after NakRetry.
const MaxNakSpan = 4096

// AckEvery is how many messages from one sender a receiver delivers
// before it acknowledges them without waiting for the tick: a fast
// sender's history stays a few thousand messages long.
const AckEvery = 1024

// AckInterval is how often a receiver acknowledges a sender that keeps
// sending (besides every AckEvery messages): each acknowledgement is a
// message into the sender, and a client broadcasting to thousands of
// procs would otherwise receive one from each every tick.
const AckInterval = time.Second

// InLimits bound what an Inbox keeps. Whatever a peer sends, the inbox
// holds at most Held bytes and tracks at most Senders senders.
type InLimits struct {
	// HeldPerSender bounds the bytes held for one sender while a gap is
	// open; Held the bytes held for all of them. Past either, the sender
	// whose frame passed it is given up on: what it misses and what is
	// held of it is lost.
	HeldPerSender, Held int
	// Senders bounds the senders tracked at once; past it, a frame from a
	// sender not tracked is dropped (and said so). Unconfirmed bounds,
	// among them, those that never had a message delivered (made-up
	// senders look like that): past it, the oldest such is forgotten.
	Senders, Unconfirmed int
	// GiveUp is how long a gap may stay open with no answer from its
	// sender (nothing delivered, nothing said missing): then NAKs to it
	// stop, and its gaps are given up on. A sender that never had a
	// message delivered is forgotten then (what was held of it dropped);
	// another's missing messages are lost.
	GiveUp time.Duration
}

// DefaultInLimits are the limits of a proc's inbox but for GiveUp, which
// its caller sets past the senders' history (see Limits.Retain).
var DefaultInLimits = InLimits{
	HeldPerSender: 256 << 20,
	Held:          1 << 30,
	Senders:       1 << 16,
	Unconfirmed:   1 << 10,
	GiveUp:        30 * time.Second,
}

// Msg is a frame as a receiver sees it: who sent it, on what, its
// numbers and fences, and the caller's payload.
type Msg struct {
	From    string
	Key     string
	Seq     uint64  // the number of its first message
	N       int     // how many messages it holds (Seq..Seq+N-1); 0 counts as 1
	Fences  []Fence // what must come before its first message
	Size    int     // bytes held while it waits
	Payload any
	// Skip, in a Msg the inbox delivers, is how many of its first
	// messages were delivered before (a repeat that overlaps what came):
	// the caller delivers the rest.
	Skip int
}

// last is the number of m's last message.
func (m *Msg) last() uint64 { return m.Seq + uint64(max(m.N, 1)) - 1 }

// Nak asks sender To for its messages on Key, Lo..Hi.
type Nak struct {
	To     string
	Key    string
	Lo, Hi uint64
}

// Ack is an acknowledgement for a sender: the receiver has every message
// on Key up to Seq.
type Ack struct {
	To  string
	Key string
	Seq uint64
}

// Loss is messages the receiver will never deliver: From's on Key, Lo..Hi.
// The caller reports them, never silently.
type Loss struct {
	From, Key string
	Lo, Hi    uint64
	Why       string
}

// Drop is a sender the inbox would not track, or forgot, with the
// messages it held of it: made up, or past the bounds. The caller counts
// it.
type Drop struct {
	From string
	Held int // messages dropped with it
	Why  string
}

// Effects is what an event asks of the caller: report the losses (they
// come before what is delivered), deliver in this order, send the NAKs,
// count the drops.
type Effects struct {
	Lost    []Loss
	Deliver []Msg
	Naks    []Nak
	Dropped []Drop
}

// Inbox is a receiver's side: what it has delivered from each sender on
// each subject, what it holds while a gap is open, the NAKs it owes and
// the acknowledgements.
type Inbox struct {
	lim        InLimits
	subscribed map[string]bool // the keys of the subjects this receiver gets
	streams    map[streamID]*stream
	senders    map[string]*inSender
	// unconfirmed lists the senders never delivered from, oldest first.
	unconfirmed list.List          // of *inSender
	held        int                // bytes held for all senders
	gapped      map[*stream]bool   // streams with a gap open
	active      map[*inSender]bool // senders delivered from since their last acknowledgement
	due         []*inSender        // senders owed an acknowledgement before the tick (AckEvery)
}

// streamID names one sender's messages on one subject.
type streamID struct{ from, key string }

// stream is what the inbox knows of one sender's messages on one subject.
type stream struct {
	id      streamID
	s       *inSender
	last    uint64 // delivered up to here
	seen    uint64 // the highest number held, if above last
	acked   uint64 // acknowledged up to here
	gap     *gap
	skipped []Range // given up on, past last+1: in order, apart
}

// highest is the highest number delivered or held.
func (st *stream) highest() uint64 { return max(st.last, st.seen) }

type inSender struct {
	name      string
	streams   []*stream
	held      []Msg // in arrival order
	heldBytes int
	waits     int           // streams with a gap open or numbers skipped
	confirmed bool          // a message of it was delivered
	unconf    *list.Element // in the unconfirmed list, until it is
	progress  bool          // something was delivered since the last acknowledgement
	ackedAt   time.Time     // when last acknowledged
	quiet     bool          // a tail marker came: the sender waits for an acknowledgement
	unacked   int           // messages delivered since
	due       bool          // in the inbox's due list
}

// busy: something of s waits, so its next message takes the slow way.
func (s *inSender) busy() bool { return len(s.held) > 0 || s.waits > 0 }

type gap struct {
	upto  uint64    // missing: numbers from last+1 to upto not held
	asked time.Time // when last asked for
	tries int       // times asked since the last progress: each retry waits twice as long
	from  uint64    // the first number last asked for
	since time.Time // when it opened, or its sender last answered: GiveUp counts from here
}

// NewInbox makes an empty inbox.
func NewInbox(l InLimits) *Inbox {
	return &Inbox{lim: l, subscribed: map[string]bool{}, streams: map[streamID]*stream{}, senders: map[string]*inSender{},
		gapped: map[*stream]bool{}, active: map[*inSender]bool{}}
}

// Subscribe says this receiver gets the subject key (its own, a group's
// it joined): messages and fences on it now count.
func (in *Inbox) Subscribe(key string) { in.subscribed[strings.Clone(key)] = true }

// Subscribed reports whether this receiver gets the subject key.
func (in *Inbox) Subscribed(key string) bool { return in.subscribed[key] }

// Next is Receive's fast path, for the common case: it delivers the frame
// of n messages at once, allocating nothing, if nothing of its sender
// waits and it is the next on its subject with its fences met; it
// reports whether it did. When it does not, the caller goes through
// Receive.
func (in *Inbox) Next(from, key string, seq uint64, n int, fences []Fence) bool {
	st := in.streams[streamID{from, key}]
	if st == nil || st.s.busy() || seq != st.last+1 {
		return false
	}
	for _, f := range fences {
		if f.Key != key && in.subscribed[f.Key] && in.lastOf(from, f.Key) < f.Seq {
			return false
		}
	}
	st.last += uint64(max(n, 1))
	in.delivered(st.s, max(n, 1))
	return true
}

// lastOf is the last number delivered from from on key.
func (in *Inbox) lastOf(from, key string) uint64 {
	if st := in.streams[streamID{from, key}]; st != nil {
		return st.last
	}
	return 0
}

// Receive takes a frame: it returns what is now deliverable, in order
// (it, held ones it freed, or nothing), the NAKs for what it shows is
// missing, and what the bounds give up or drop.
func (in *Inbox) Receive(m Msg, now time.Time) (e Effects) {
	m.N = max(m.N, 1)
	if m.last() < m.Seq || m.Seq == 0 || !in.subscribed[m.Key] {
		e.Dropped = append(e.Dropped, Drop{From: m.From, Why: fmt.Sprintf("a frame numbered %d (+%d) on %.40q, a subject not received here", m.Seq, m.N, m.Key)})
		return e
	}
	s := in.sender(m.From, &e)
	if s == nil {
		return e
	}
	st := in.stream(s, m.Key)
	if m.last() <= st.last {
		return e // a repeat
	}
	for _, x := range st.skipped {
		if m.Seq <= x.Hi && x.Lo <= m.last() {
			// Numbers its sender said it no longer holds: they were said
			// lost, and are not delivered now (the sender's own frames
			// never do this).
			e.Dropped = append(e.Dropped, Drop{From: s.name, Why: fmt.Sprintf("a frame numbered %d (+%d) on %s, said missing before", m.Seq, m.N, m.Key)})
			return e
		}
	}
	if in.deliverable(st, &m) {
		e.Deliver = in.drain(s, in.deliver(st, m, nil, now), now)
		return e
	}
	for _, h := range s.held {
		if h.Key == m.Key && h.Seq == m.Seq {
			return e // held already
		}
	}
	s.held = append(s.held, m)
	s.heldBytes += m.Size
	in.held += m.Size
	e.Naks = in.noteGaps(s, st, &m, now)
	switch {
	case s.heldBytes > in.lim.HeldPerSender:
		in.overflow(s, fmt.Sprintf("held more than %d bytes of it while waiting for what was missing", in.lim.HeldPerSender), &e, now)
	case in.held > in.lim.Held:
		in.overflow(s, fmt.Sprintf("held more than %d bytes of all senders while waiting for what was missing", in.lim.Held), &e, now)
	}
	return e
}

// Tail takes a tail marker: the sender's last number on key. A gap it
// reveals is asked for.
func (in *Inbox) Tail(from, key string, seq uint64, now time.Time) (e Effects) {
	if seq == 0 || !in.subscribed[key] {
		return e
	}
	s := in.sender(from, &e)
	if s == nil {
		return e
	}
	st := in.stream(s, key)
	s.quiet = true // acknowledge at the next tick: the sender waits for it
	in.active[s] = true
	if seq > st.highest() {
		e.Naks = in.widen(st, seq, now, nil)
	}
	return e
}

// Missing takes a sender's answer that it no longer holds its messages
// on key, lo..hi. Only numbers this inbox asked for and still misses
// (neither delivered nor held) are given up on, and reported lost; an
// answer for anything else (numbers it has, a subject or sender it never
// asked) changes nothing.
func (in *Inbox) Missing(from, key string, lo, hi uint64, now time.Time) (e Effects) {
	st := in.streams[streamID{from, key}]
	if st == nil || st.gap == nil {
		return e
	}
	lo, hi = max(lo, st.last+1), min(hi, st.gap.upto)
	if lo > hi {
		return e
	}
	st.gap.since = now
	for _, r := range in.notHeld(st, Range{lo, hi}) {
		e.Lost = append(e.Lost, Loss{From: st.s.name, Key: st.id.key, Lo: r.Lo, Hi: r.Hi, Why: "the sender no longer holds them"})
		in.skip(st, r)
	}
	in.advance(st, now)
	e.Deliver = in.drain(st.s, nil, now)
	return e
}

// notHeld is the numbers of r still missing: neither held nor given up
// on already, as ranges.
func (in *Inbox) notHeld(st *stream, r Range) []Range {
	out := []Range{r}
	cut := func(lo, hi uint64) {
		var next []Range
		for _, x := range out {
			if hi < x.Lo || lo > x.Hi {
				next = append(next, x)
				continue
			}
			if lo > x.Lo {
				next = append(next, Range{x.Lo, lo - 1})
			}
			if hi < x.Hi {
				next = append(next, Range{hi + 1, x.Hi})
			}
		}
		out = next
	}
	for _, h := range st.s.held {
		if h.Key == st.id.key {
			cut(h.Seq, h.last())
		}
	}
	for _, x := range st.skipped {
		cut(x.Lo, x.Hi)
	}
	return out
}

// skip records that the numbers of r will not come.
func (in *Inbox) skip(st *stream, r Range) {
	if len(st.skipped) == 0 {
		st.s.waits++
	}
	i, _ := slices.BinarySearchFunc(st.skipped, r.Lo, func(x Range, lo uint64) int {
		switch {
		case x.Lo < lo:
			return -1
		case x.Lo > lo:
			return 1
		}
		return 0
	})
	st.skipped = slices.Insert(st.skipped, i, r)
	// Join ranges that touch.
	out := st.skipped[:1]
	for _, x := range st.skipped[1:] {
		if p := &out[len(out)-1]; x.Lo <= p.Hi+1 {
			p.Hi = max(p.Hi, x.Hi)
		} else {
			out = append(out, x)
		}
	}
	st.skipped = out
}

// Tick asks again for what is still missing (NakRetry after the first
// asking, then twice as long each time, up to 16 x NakRetry, at most
// MaxNakSpan numbers a subject) and gives up on gaps unanswered for
// GiveUp.
func (in *Inbox) Tick(now time.Time) (e Effects) {
	var giveUp []*inSender
	for _, st := range in.gaps() {
		g := st.gap
		if now.Sub(g.since) >= in.lim.GiveUp {
			if !slices.Contains(giveUp, st.s) {
				giveUp = append(giveUp, st.s)
			}
			continue
		}
		lo := st.last + 1
		if lo > g.from {
			g.tries = 0 // what was asked for came: ask on at once
		}
		if now.Sub(g.asked) >= NakRetry<<min(g.tries, 4) {
			g.asked, g.from = now, lo
			g.tries++
			e.Naks = append(e.Naks, Nak{To: st.s.name, Key: st.id.key, Lo: lo, Hi: min(g.upto, lo+MaxNakSpan-1)})
		}
	}
	for _, s := range giveUp {
		in.giveUp(s, &e, now)
	}
	return e
}

// gaps is the streams with a gap open, in a fixed order (by sender and
// subject), so that what a tick says does not depend on a map's.
func (in *Inbox) gaps() []*stream {
	sts := make([]*stream, 0, len(in.gapped))
	for st := range in.gapped {
		sts = append(sts, st)
	}
	slices.SortFunc(sts, func(a, b *stream) int {
		if c := strings.Compare(a.id.from, b.id.from); c != 0 {
			return c
		}
		return strings.Compare(a.id.key, b.id.key)
	})
	return sts
}

// giveUp stops asking s: a sender never delivered from is forgotten;
// another's gaps are lost, and what they held back is delivered.
func (in *Inbox) giveUp(s *inSender, e *Effects, now time.Time) {
	why := fmt.Sprintf("no answer from it to NAKs for %v", in.lim.GiveUp)
	if !s.confirmed {
		e.Dropped = append(e.Dropped, Drop{From: s.name, Held: len(s.held), Why: why + "; nothing of it was ever delivered"})
		in.forget(s)
		return
	}
	for _, st := range s.streams {
		if st.gap == nil {
			continue
		}
		for _, r := range in.notHeld(st, Range{st.last + 1, st.gap.upto}) {
			e.Lost = append(e.Lost, Loss{From: s.name, Key: st.id.key, Lo: r.Lo, Hi: r.Hi, Why: why})
			in.skip(st, r)
		}
		in.advance(st, now)
	}
	e.Deliver = in.drain(s, e.Deliver, now)
}

// overflow gives up on s, whose held messages passed a bound: what is
// missing and what is held of it is lost; it starts again after them.
func (in *Inbox) overflow(s *inSender, why string, e *Effects, now time.Time) {
	held := s.held
	s.held = nil // what notHeld should not count: it is lost too
	for _, st := range s.streams {
		if hi := st.highest(); hi > st.last {
			for _, r := range in.notHeld(st, Range{st.last + 1, hi}) {
				e.Lost = append(e.Lost, Loss{From: s.name, Key: st.id.key, Lo: r.Lo, Hi: r.Hi, Why: why})
			}
			st.last, st.seen = hi, 0
			in.advance(st, now)
		}
	}
	in.held -= s.heldBytes
	clear(held)
	s.held, s.heldBytes = held[:0], 0
}

// LinkUp says the link came back after a drop: every gap is asked for
// now, and waits its GiveUp again from now.
func (in *Inbox) LinkUp(now time.Time) (e Effects) {
	for _, st := range in.gaps() {
		g := st.gap
		lo := st.last + 1
		g.asked, g.from, g.tries, g.since = now, lo, 1, now
		e.Naks = append(e.Naks, Nak{To: st.s.name, Key: st.id.key, Lo: lo, Hi: min(g.upto, lo+MaxNakSpan-1)})
	}
	return e
}

// Acks returns the acknowledgements due at a tick: for each sender
// something was delivered from since its last acknowledgement, AckInterval
// after that one or once the sender went quiet (its tail marker came), the
// last number on each subject that moved. The caller sends them, and the
// senders stop keeping what they acknowledge.
func (in *Inbox) Acks(now time.Time) []Ack {
	var acks []Ack
	for s := range in.active {
		if s.quiet || now.Sub(s.ackedAt) >= AckInterval {
			s.ackedAt, s.quiet = now, false
			acks = in.ack(s, acks)
			delete(in.active, s)
		}
	}
	return acks
}

// AcksDue reports whether a sender is owed an acknowledgement before the
// tick: AckEvery messages came from it since its last.
func (in *Inbox) AcksDue() bool { return len(in.due) > 0 }

// DueAcks returns the acknowledgements owed before the tick.
func (in *Inbox) DueAcks() []Ack {
	var acks []Ack
	for _, s := range in.due {
		if s.due {
			acks = in.ack(s, acks)
		}
	}
	clear(in.due)
	in.due = in.due[:0]
	return acks
}

// ack appends s's acknowledgements to acks.
func (in *Inbox) ack(s *inSender, acks []Ack) []Ack {
	s.due = false
	if !s.progress {
		return acks
	}
	s.progress, s.unacked = false, 0
	for _, st := range s.streams {
		if st.last > st.acked {
			st.acked = st.last
			acks = append(acks, Ack{To: s.name, Key: st.id.key, Seq: st.last})
		}
	}
	return acks
}

// Forget drops a sender (it ended) and what was held of it.
func (in *Inbox) Forget(from string) {
	if s := in.senders[from]; s != nil {
		in.forget(s)
	}
}

func (in *Inbox) forget(s *inSender) {
	for _, st := range s.streams {
		delete(in.streams, st.id)
		delete(in.gapped, st)
	}
	if !s.confirmed {
		in.unconfirmed.Remove(s.unconf)
	}
	in.held -= s.heldBytes
	delete(in.active, s)
	s.progress, s.due = false, false // nothing to acknowledge if it is in due
	delete(in.senders, s.name)
}

// Waiting reports whether anything of from is held.
func (in *Inbox) Waiting(from string) bool {
	s := in.senders[from]
	return s != nil && len(s.held) > 0
}

// Senders is how many senders the inbox tracks.
func (in *Inbox) Senders() int { return len(in.senders) }

// sender is from's state, made if new: nil if the bounds refuse it (said
// in e).
func (in *Inbox) sender(from string, e *Effects) *inSender {
	if s := in.senders[from]; s != nil {
		return s
	}
	if len(in.senders) >= in.lim.Senders || in.unconfirmed.Len() >= in.lim.Unconfirmed {
		front := in.unconfirmed.Front()
		if front == nil {
			e.Dropped = append(e.Dropped, Drop{From: from, Why: fmt.Sprintf("%d senders tracked already", len(in.senders))})
			return nil
		}
		old := front.Value.(*inSender)
		e.Dropped = append(e.Dropped, Drop{From: old.name, Held: len(old.held),
			Why: fmt.Sprintf("forgotten for a new sender: the oldest of %d never delivered from", in.unconfirmed.Len())})
		in.forget(old)
	}
	s := &inSender{name: strings.Clone(from)} // from may alias a received buffer
	in.senders[s.name] = s
	s.unconf = in.unconfirmed.PushBack(s)
	return s
}

// stream is s's stream on key, made if new (key is one this inbox
// receives: their number is bounded).
func (in *Inbox) stream(s *inSender, key string) *stream {
	if st := in.streams[streamID{s.name, key}]; st != nil {
		return st
	}
	st := &stream{id: streamID{s.name, strings.Clone(key)}, s: s}
	in.streams[st.id] = st
	s.streams = append(s.streams, st)
	return st
}

// delivered counts n messages of s delivered.
func (in *Inbox) delivered(s *inSender, n int) {
	if !s.confirmed {
		s.confirmed = true
		in.unconfirmed.Remove(s.unconf)
		s.unconf = nil
	}
	if !s.progress {
		s.progress = true
		in.active[s] = true
	}
	if s.unacked += n; s.unacked >= AckEvery && !s.due {
		s.due = true
		in.due = append(in.due, s)
	}
}

// deliverable: it reaches the next number on its subject, and every fence
// on a subject this receiver gets is met.
func (in *Inbox) deliverable(st *stream, m *Msg) bool {
	if m.Seq > st.last+1 {
		return false
	}
	for _, f := range m.Fences {
		if f.Key != m.Key && in.subscribed[f.Key] && in.lastOf(m.From, f.Key) < f.Seq {
			return false
		}
	}
	return true
}

func (in *Inbox) deliver(st *stream, m Msg, out []Msg, now time.Time) []Msg {
	m.Skip = int(st.last + 1 - m.Seq)
	in.delivered(st.s, m.N-m.Skip)
	st.last = m.last()
	if st.seen <= st.last {
		st.seen = 0
	}
	if st.gap != nil {
		st.gap.since = now
	}
	in.advance(st, now)
	return append(out, m)
}

// advance moves the last delivered number past the numbers given up on,
// and closes the gap once it is filled.
func (in *Inbox) advance(st *stream, now time.Time) {
	for len(st.skipped) > 0 && st.skipped[0].Lo <= st.last+1 {
		st.last = max(st.last, st.skipped[0].Hi)
		st.skipped = st.skipped[1:]
		if len(st.skipped) == 0 {
			st.s.waits--
		}
	}
	if st.gap != nil && st.last >= st.gap.upto {
		in.closeGap(st)
	}
}

func (in *Inbox) closeGap(st *stream) {
	st.gap = nil
	st.s.waits--
	delete(in.gapped, st)
}

// drain delivers held messages that have become deliverable, until none
// does. Whichever order they go in is right: a message is deliverable only
// once everything before it for this receiver is delivered.
func (in *Inbox) drain(s *inSender, out []Msg, now time.Time) []Msg {
	for progress := true; progress && len(s.held) > 0; {
		progress = false
		for i := 0; i < len(s.held); i++ {
			m := s.held[i]
			st := in.streams[streamID{s.name, m.Key}]
			repeat := m.last() <= st.last // what it holds came since
			if !repeat && !in.deliverable(st, &m) {
				continue
			}
			s.held = slices.Delete(s.held, i, i+1)
			s.heldBytes -= m.Size
			in.held -= m.Size
			i--
			if !repeat {
				out = in.deliver(st, m, out, now)
				progress = true
			}
		}
	}
	return out
}

// noteGaps records what m shows is missing and asks for it.
func (in *Inbox) noteGaps(s *inSender, st *stream, m *Msg, now time.Time) []Nak {
	var naks []Nak
	// Only what is neither delivered nor held is missing: a message held
	// after a gap does not widen it.
	if m.Seq > st.highest()+1 {
		naks = in.widen(st, m.Seq-1, now, naks)
	}
	st.seen = max(st.seen, m.last())
	for _, f := range m.Fences {
		if f.Key == m.Key || !in.subscribed[f.Key] {
			continue // a fence on its own subject says nothing (made up)
		}
		if fs := in.stream(s, f.Key); fs.highest() < f.Seq {
			naks = in.widen(fs, f.Seq, now, naks)
		}
	}
	return naks
}

// widen records that messages on st up to upto are missing; a gap that
// is new or grows is asked for now.
func (in *Inbox) widen(st *stream, upto uint64, now time.Time, naks []Nak) []Nak {
	g := st.gap
	if g != nil && g.upto >= upto {
		return naks
	}
	lo := st.highest() + 1
	if g != nil {
		lo = max(lo, g.upto+1)
		g.upto = upto
	} else {
		g = &gap{upto: upto, since: now}
		st.gap = g
		st.s.waits++
		in.gapped[st] = true
	}
	g.asked, g.tries, g.from = now, 0, st.last+1
	return append(naks, Nak{To: st.s.name, Key: st.id.key, Lo: lo, Hi: min(upto, lo+MaxNakSpan-1)})
}
