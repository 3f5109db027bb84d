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
	// open; Held the bytes held for all of them. Past either, what is
	// held of the sender whose frame passed it is dropped: a member's
	// gap stays open and is asked for again (its sender sends it all
	// again), anyone else is forgotten. Nothing is lost for it.
	HeldPerSender, Held int
	// Senders bounds the senders tracked at once. Strangers bounds,
	// among them, those not known to be members of the job (Standing):
	// past either, the stranger heard from least recently is forgotten
	// for a new sender; a frame from a new sender is dropped (and said
	// so) only while every stranger tracked is being asked about, which
	// lasts until its answer.
	Senders, Strangers int
	// GiveUp is how long a gap may stay open with no answer from its
	// sender (nothing delivered, nothing said missing): then NAKs to it
	// stop. A stranger is forgotten then (what was held of it dropped);
	// a member's gaps are closed and what they held back is dropped, not
	// lost: a later frame of it opens them again, and asks again.
	GiveUp time.Duration
	// Ahead bounds how far past the last number delivered on a subject
	// a frame's, a tail marker's or a fence's number may be: one past it
	// is refused (dropped, said so), not waited for. See DefaultAhead.
	Ahead uint64
}

// DefaultAhead is the Ahead of a proc's inbox. A sender keeps at most
// 256 MiB of frames to send again (delivery.KeepBytes), and a message
// costs at least 2 bytes of them (a run's framing): it can make good at
// most 2^27 numbers a receiver missed; past that, what comes first is
// lost whatever the receiver asks. DefaultAhead is 32 times that, a
// margin no sender of the job reaches: four billion messages one
// receiver missed, over an hour at the fastest one-way rate measured (W2
// broadcast, about a million a second), while the receiver stayed in the
// job.
const DefaultAhead = 1 << 32

// DefaultInLimits are the limits of a proc's inbox but for GiveUp, which
// its caller sets past the senders' history (see Limits.Retain).
var DefaultInLimits = InLimits{
	HeldPerSender: 256 << 20,
	Held:          1 << 30,
	Senders:       1 << 16,
	Strangers:     1 << 10,
	GiveUp:        30 * time.Second,
	Ahead:         DefaultAhead,
}

// Standing is what a receiver knows of a sender's place in the job. Only
// a member's word that it no longer holds messages makes them lost.
type Standing uint8

const (
	// Unknown: not known yet. Once a message of it is delivered, the
	// inbox asks its caller to find out (Effects.Ask, then Judged).
	Unknown Standing = iota
	// Member: in the job (the client, a proc it heard of, one a proc's
	// spawner or agent vouched for).
	Member
	// Stranger: not in the job, or no longer (made up, gone): the first
	// forgotten when the sender table is full.
	Stranger
)

func (s Standing) String() string {
	switch s {
	case Member:
		return "member"
	case Stranger:
		return "stranger"
	}
	return "unknown"
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
// count the drops, find out whether the senders in Ask are members of
// the job (and say so with Judged).
type Effects struct {
	Lost    []Loss
	Deliver []Msg
	Naks    []Nak
	Dropped []Drop
	Ask     []string
}

// Inbox is a receiver's side: what it has delivered from each sender on
// each subject, what it holds while a gap is open, the NAKs it owes and
// the acknowledgements.
type Inbox struct {
	lim        InLimits
	standing   func(from string) Standing // nil: every sender is a member
	subscribed map[string]bool            // the keys of the subjects this receiver gets
	streams    map[streamID]*stream
	senders    map[string]*inSender
	// strangers lists the senders that may be forgotten for a new one,
	// least recently heard from first: those not members that are not
	// being asked about (asking counts those).
	strangers list.List // of *inSender
	asking    int
	asks      []string           // senders to ask about, for the event's Effects
	held      int                // bytes held for all senders
	gapped    map[*stream]bool   // streams with a gap open
	active    map[*inSender]bool // senders delivered from since their last acknowledgement
	due       []*inSender        // senders owed an acknowledgement before the tick (AckEvery)
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
	waits     int  // streams with a gap open or numbers skipped
	confirmed bool // a message of it was delivered
	standing  Standing
	asking    bool          // Unknown, delivered from: asked about
	strange   *list.Element // in the strangers list
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
	told  uint64    // the highest number asked for: answers past it are not taken
	asked time.Time // when last asked for
	tries int       // times asked since the last progress: each retry waits twice as long
	from  uint64    // the first number last asked for
	since time.Time // when it opened, or its sender last answered: GiveUp counts from here
}

// NewInbox makes an empty inbox. standing says what its caller knows of
// a sender when it is first heard from (nil: every sender is a member,
// for an inbox that trusts whatever reaches it); Judged tells it more
// later.
func NewInbox(l InLimits, standing func(from string) Standing) *Inbox {
	return &Inbox{lim: l, standing: standing, subscribed: map[string]bool{}, streams: map[streamID]*stream{}, senders: map[string]*inSender{},
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
	if st == nil || st.s.busy() || !st.s.confirmed || seq != st.last+1 {
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
	if why := in.tooFar(m.From, m.Key, m.Seq); why != "" {
		e.Dropped = append(e.Dropped, Drop{From: m.From, Why: "a frame numbered " + why})
		return e
	}
	for _, f := range m.Fences {
		if f.Key != m.Key && in.subscribed[f.Key] {
			if why := in.tooFar(m.From, f.Key, f.Seq); why != "" {
				e.Dropped = append(e.Dropped, Drop{From: m.From, Why: fmt.Sprintf("a frame numbered %d on %s with a fence at %s", m.Seq, m.Key, why)})
				return e
			}
		}
	}
	s := in.sender(m.From, &e)
	if s == nil {
		return e
	}
	in.heard(s)
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
		e.Ask = in.takeAsks()
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
		why := fmt.Sprintf("held more than %d bytes of all senders while waiting for what was missing", in.lim.Held)
		// Strangers' first, least recently heard from first.
		for x := in.strangers.Front(); x != nil && in.held > in.lim.Held; {
			next := x.Next()
			if o := x.Value.(*inSender); o != s && o.heldBytes > 0 {
				in.overflow(o, why, &e, now)
			}
			x = next
		}
		if in.held > in.lim.Held {
			in.overflow(s, why, &e, now)
		}
	}
	return e
}

// tooFar says why number seq of from on key is past what its sender can
// have sent (more than Ahead past the last delivered there), or "".
func (in *Inbox) tooFar(from, key string, seq uint64) string {
	last := in.lastOf(from, key)
	if seq <= last || seq-last <= in.lim.Ahead {
		return ""
	}
	return fmt.Sprintf("%d on %s, more than %d past the last delivered there (%d)", seq, key, in.lim.Ahead, last)
}

// Tail takes a tail marker: the sender's last number on key. A gap it
// reveals is asked for.
func (in *Inbox) Tail(from, key string, seq uint64, now time.Time) (e Effects) {
	if seq == 0 || !in.subscribed[key] {
		return e
	}
	if why := in.tooFar(from, key, seq); why != "" {
		e.Dropped = append(e.Dropped, Drop{From: from, Why: "a tail marker numbered " + why})
		return e
	}
	s := in.sender(from, &e)
	if s == nil {
		return e
	}
	in.heard(s)
	st := in.stream(s, key)
	s.quiet = true // acknowledge at the next tick: the sender waits for it
	in.active[s] = true
	if seq > st.highest() {
		e.Naks = in.widen(st, seq, now, nil)
	}
	return e
}

// Missing takes a sender's answer that it no longer holds its messages
// on key, lo..hi. Only a member's answer counts, and only for numbers
// this inbox asked it for and still misses (neither delivered nor held):
// those are given up on, and reported lost. An answer for anything else
// (numbers it has or never asked for, a subject or sender it never
// asked) changes nothing; one from a sender not known to be in the job
// is dropped, and said so.
func (in *Inbox) Missing(from, key string, lo, hi uint64, now time.Time) (e Effects) {
	st := in.streams[streamID{from, key}]
	if st == nil || st.gap == nil {
		return e
	}
	if st.s.standing != Member {
		e.Dropped = append(e.Dropped, Drop{From: st.s.name, Why: fmt.Sprintf("an answer that it no longer holds %d..%d on %s, from a sender not known to be in the job (%v)", lo, hi, key, st.s.standing)})
		return e
	}
	lo, hi = max(lo, st.last+1), min(hi, st.gap.told)
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
			e.Naks = append(e.Naks, g.nak(st, lo))
		}
	}
	for _, s := range giveUp {
		in.giveUp(s, &e)
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

// giveUp stops asking s. A stranger (or one being asked about) is
// forgotten. A member's gaps are closed and what it held back dropped,
// not lost: only its own word makes messages lost. A later frame of it
// opens the gaps again and asks again, and a member that was only slow
// answers then (with the messages, or that it no longer holds them).
func (in *Inbox) giveUp(s *inSender, e *Effects) {
	why := fmt.Sprintf("no answer from it to NAKs for %v", in.lim.GiveUp)
	if s.standing != Member {
		if !s.confirmed {
			why += "; nothing of it was ever delivered"
		}
		e.Dropped = append(e.Dropped, Drop{From: s.name, Held: len(s.held), Why: fmt.Sprintf("%s; not known to be in the job (%v)", why, s.standing)})
		in.forget(s)
		return
	}
	e.Dropped = append(e.Dropped, Drop{From: s.name, Held: len(s.held), Why: why + "; its gaps are asked for again when it sends"})
	in.dropHeld(s)
	for _, st := range s.streams {
		st.seen = 0
		if st.gap != nil {
			in.closeGap(st)
		}
	}
}

// overflow drops what is held of s, whose held messages passed a bound.
// A member's gaps widen over what was dropped, which is asked for again.
// Anyone else is forgotten.
func (in *Inbox) overflow(s *inSender, why string, e *Effects, now time.Time) {
	e.Dropped = append(e.Dropped, Drop{From: s.name, Held: len(s.held), Why: why})
	if s.standing != Member {
		in.forget(s)
		return
	}
	in.dropHeld(s)
	for _, st := range s.streams {
		if hi := st.seen; hi > st.last {
			st.seen = 0
			e.Naks = in.widen(st, hi, now, e.Naks)
		}
	}
}

// dropHeld drops every message held of s.
func (in *Inbox) dropHeld(s *inSender) {
	in.held -= s.heldBytes
	clear(s.held)
	s.held, s.heldBytes = s.held[:0], 0
}

// LinkUp says the link came back after a drop: every gap is asked for
// now, and waits its GiveUp again from now.
func (in *Inbox) LinkUp(now time.Time) (e Effects) {
	for _, st := range in.gaps() {
		g := st.gap
		lo := st.last + 1
		g.asked, g.from, g.tries, g.since = now, lo, 1, now
		e.Naks = append(e.Naks, g.nak(st, lo))
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
	in.unlist(s)
	in.held -= s.heldBytes
	delete(in.active, s)
	s.progress, s.due = false, false // nothing to acknowledge if it is in due
	delete(in.senders, s.name)
}

// Judged says what the caller found out about a sender it was asked
// about (Effects.Ask), or learned otherwise: a member's word on what it
// no longer holds counts from now on; a stranger may be forgotten for a
// new sender, and a member found a stranger (no longer in the job) is
// forgotten now.
func (in *Inbox) Judged(from string, st Standing) {
	s := in.senders[from]
	if s == nil || st == Unknown || st == s.standing && !s.asking {
		return
	}
	if st == Stranger && s.standing == Member {
		in.forget(s)
		return
	}
	in.unlist(s)
	s.standing = st
	if st == Stranger {
		s.strange = in.strangers.PushBack(s)
	}
}

// unlist takes s out of the strangers list, or out of those asked about.
func (in *Inbox) unlist(s *inSender) {
	if s.strange != nil {
		in.strangers.Remove(s.strange)
		s.strange = nil
	}
	if s.asking {
		s.asking = false
		in.asking--
	}
}

// heard moves a stranger to the back of the list: forgotten last.
func (in *Inbox) heard(s *inSender) {
	if s.strange != nil {
		in.strangers.MoveToBack(s.strange)
	}
}

// takeAsks returns the senders to ask about, and forgets them.
func (in *Inbox) takeAsks() []string {
	if len(in.asks) == 0 {
		return nil
	}
	a := in.asks
	in.asks = nil
	return a
}

// Waiting reports whether anything of from is held.
func (in *Inbox) Waiting(from string) bool {
	s := in.senders[from]
	return s != nil && len(s.held) > 0
}

// Senders is how many senders the inbox tracks.
func (in *Inbox) Senders() int { return len(in.senders) }

// Strangers is how many of them are not known to be members.
func (in *Inbox) Strangers() int { return in.strangers.Len() + in.asking }

// sender is from's state, made if new: nil if the bounds refuse it (said
// in e). A new sender takes the place of the stranger heard from least
// recently when the table, or its share of strangers, is full.
func (in *Inbox) sender(from string, e *Effects) *inSender {
	if s := in.senders[from]; s != nil {
		return s
	}
	standing := Member
	if in.standing != nil {
		standing = in.standing(from)
	}
	for len(in.senders) >= in.lim.Senders || standing != Member && in.Strangers() >= in.lim.Strangers {
		front := in.strangers.Front()
		if front == nil {
			why := fmt.Sprintf("%d senders tracked already, none of them a stranger to forget", len(in.senders))
			if standing != Member {
				why = fmt.Sprintf("%d senders not known to be in the job tracked already, all being asked about", in.Strangers())
			}
			e.Dropped = append(e.Dropped, Drop{From: from, Why: why})
			return nil
		}
		old := front.Value.(*inSender)
		e.Dropped = append(e.Dropped, Drop{From: old.name, Held: len(old.held),
			Why: fmt.Sprintf("forgotten for a new sender: the stranger heard from least recently (%d tracked)", in.strangers.Len())})
		in.forget(old)
	}
	s := &inSender{name: strings.Clone(from), standing: standing} // from may alias a received buffer
	in.senders[s.name] = s
	if standing != Member {
		s.strange = in.strangers.PushBack(s)
	}
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
		if s.standing == Unknown {
			// Delivered from: forgetting it now could deliver its
			// messages twice, so it is asked about, and kept meanwhile.
			in.unlist(s)
			s.asking = true
			in.asking++
			in.asks = append(in.asks, s.name)
		}
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
	return append(naks, g.nak(st, lo))
}

// nak asks st's sender for the gap's numbers from lo, at most
// MaxNakSpan of them, and notes that they were asked for.
func (g *gap) nak(st *stream, lo uint64) Nak {
	hi := min(g.upto, lo+MaxNakSpan-1)
	g.told = max(g.told, hi)
	return Nak{To: st.s.name, Key: st.id.key, Lo: lo, Hi: hi}
}
