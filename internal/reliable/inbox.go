package reliable

import (
	"slices"
	"strings"
	"time"
)

// NakRetry is how long a receiver waits for what it asked for before it
// asks again.
const NakRetry = 250 * time.Millisecond

// Msg is a message as a receiver sees it: who sent it, on what, its
// sequence number and fences, and the caller's payload (the frame).
type Msg struct {
	From    string
	Key     string
	Seq     uint64
	Fences  []Fence
	Size    int // bytes held while it waits
	Payload any
}

// Nak asks sender To for its messages on Key from From to Upto.
type Nak struct {
	To   string
	Key  string
	From uint64
	Upto uint64
}

// Inbox is a receiver's side: what it has delivered from each sender, and
// what it holds while a gap is open.
type Inbox struct {
	subscribed map[string]bool // the keys of the subjects this receiver gets
	senders    map[string]*inSender
	maxHeld    int         // bytes held per sender, at most
	due        []*inSender // senders owed an acknowledgement before the tick (AckEvery)
}

// AckEvery is how many messages from one sender a receiver delivers
// before it acknowledges them without waiting for the tick: a fast
// sender's history stays a few thousand messages long.
const AckEvery = 1024

type inSender struct {
	name      string
	last      map[string]uint64 // key -> the last sequence number delivered
	seen      map[string]uint64 // key -> the highest number held, if above last
	held      []Msg             // in arrival order
	heldBytes int
	gaps      map[string]*gap            // key -> what is missing
	skipped   map[string]map[uint64]bool // key -> numbers given up on, not yet reached
	acked     map[string]uint64          // key -> the number last acknowledged to the sender
	progress  bool                       // something was delivered since the last Acks
	ackedAt   time.Time                  // when last acknowledged
	quiet     bool                       // a tail marker came: the sender went quiet
	unacked   int                        // messages delivered since
	due       bool                       // in the inbox's due list
}

type gap struct {
	upto  uint64    // missing: numbers from last+1 to upto not held
	asked time.Time // when last asked for
	tries int       // times asked since the last progress: each retry waits twice as long
	from  uint64    // the first number last asked for
}

// MaxNakSpan bounds the numbers one NAK asks for: a receiver that missed
// more asks for the rest as the first ones come, so that a long gap is
// never sent again whole, NakRetry after NakRetry.
const MaxNakSpan = 4096

// NewInbox makes an inbox that holds at most maxHeld bytes per sender
// while it waits for what is missing.
func NewInbox(maxHeld int) *Inbox {
	return &Inbox{subscribed: map[string]bool{}, senders: map[string]*inSender{}, maxHeld: maxHeld}
}

// Subscribe says this receiver gets the subject key (its own, a group's it
// joined): fences on it now count.
func (in *Inbox) Subscribe(key string) { in.subscribed[key] = true }

func (in *Inbox) sender(from string) *inSender {
	s := in.senders[from]
	if s == nil {
		name := strings.Clone(from) // from may alias a received buffer
		s = &inSender{name: name, last: map[string]uint64{}, seen: map[string]uint64{}, gaps: map[string]*gap{}}
		in.senders[name] = s
	}
	return s
}

// Next is Receive's fast path, for the common case: it delivers the
// message at once, allocating nothing, if nothing of its sender is held
// and it is the next on its subject with its fences met; it reports
// whether it did. When it does not, the caller goes through Receive.
func (in *Inbox) Next(from, key string, seq uint64, fences []Fence) bool {
	s := in.senders[from]
	if s == nil || len(s.held) > 0 || s.skipped != nil || len(s.gaps) > 0 {
		return false
	}
	last, ok := s.last[key]
	if seq != last+1 || !ok && seq != 1 {
		return false
	}
	for _, f := range fences {
		if in.subscribed[f.Key] && s.last[f.Key] < f.Seq {
			return false
		}
	}
	if ok {
		s.last[key] = seq
	} else {
		s.last[strings.Clone(key)] = seq
	}
	in.delivered(s)
	return true
}

// delivered counts a message of s delivered.
func (in *Inbox) delivered(s *inSender) {
	s.progress = true
	if s.unacked++; s.unacked >= AckEvery && !s.due {
		s.due = true
		in.due = append(in.due, s)
	}
}

// Ack is an acknowledgement for a sender: it has every message on Key up
// to Seq.
type Ack struct {
	To  string
	Key string
	Seq uint64
}

// AckInterval is how often a receiver acknowledges a sender that keeps
// sending (besides every AckEvery messages): each acknowledgement is a
// message into the sender, and a client broadcasting to thousands of
// procs would otherwise receive one from each every tick.
const AckInterval = time.Second

// Acks returns the acknowledgements due at a tick: for each sender
// something was delivered from since its last acknowledgement, AckInterval
// after that one or once the sender went quiet (its tail marker came), the
// last number on each subject that moved. The caller sends them, and the
// senders stop keeping what they acknowledge.
func (in *Inbox) Acks(now time.Time) []Ack {
	var acks []Ack
	for _, s := range in.senders {
		if s.quiet || now.Sub(s.ackedAt) >= AckInterval {
			s.ackedAt, s.quiet = now, false
			acks = in.ack(s, acks)
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
	if s.acked == nil {
		s.acked = map[string]uint64{}
	}
	for key, last := range s.last {
		if last > s.acked[key] {
			s.acked[key] = last
			acks = append(acks, Ack{To: s.name, Key: key, Seq: last})
		}
	}
	return acks
}

// Receive takes a message and returns what is now deliverable, in order
// (it, held ones it freed, or nothing), and the NAKs to send. overflow
// says the sender's held messages passed the bound: the caller gives up on
// that sender, and reports it.
func (in *Inbox) Receive(m Msg, now time.Time) (deliver []Msg, naks []Nak, overflow bool) {
	s := in.sender(m.From)
	if m.Seq <= s.last[m.Key] {
		return nil, nil, false // a duplicate
	}
	if in.deliverable(s, &m) {
		deliver = in.deliver(s, m, nil)
		return in.drain(s, deliver), nil, false
	}
	for _, h := range s.held {
		if h.Key == m.Key && h.Seq == m.Seq {
			return nil, nil, false // held already
		}
	}
	s.held = append(s.held, m)
	s.heldBytes += m.Size
	naks = in.noteGaps(s, m.From, &m, now)
	return nil, naks, s.heldBytes > in.maxHeld
}

// Tail takes a tail marker: the sender's last sequence number on key. A
// gap it reveals is asked for.
func (in *Inbox) Tail(from, key string, seq uint64, now time.Time) []Nak {
	s := in.sender(from)
	s.quiet = true // acknowledge at the next tick: the sender waits for it
	if seq <= s.highest(key) {
		return nil
	}
	return in.widen(s, from, key, seq, now, nil)
}

// highest is the highest number on key delivered or held.
func (s *inSender) highest(key string) uint64 { return max(s.last[key], s.seen[key]) }

// Tick asks again for what is still missing: NakRetry after the first
// asking, then twice as long each time (up to 16 x NakRetry), at most
// MaxNakSpan numbers a subject.
func (in *Inbox) Tick(now time.Time) []Nak {
	var naks []Nak
	for from, s := range in.senders {
		for key, g := range s.gaps {
			lo := s.last[key] + 1
			if lo > g.from {
				g.tries = 0 // what was asked for came: ask on at once
			}
			if now.Sub(g.asked) >= NakRetry<<min(g.tries, 4) {
				g.asked, g.from = now, lo
				g.tries++
				naks = append(naks, Nak{To: from, Key: key, From: lo, Upto: min(g.upto, lo+MaxNakSpan-1)})
			}
		}
	}
	return naks
}

// Skip gives up on message seq of from on key (the sender no longer has
// it): it returns what that frees. The caller reports the loss.
func (in *Inbox) Skip(from, key string, seq uint64) []Msg {
	s := in.sender(from)
	if seq <= s.last[key] {
		return nil
	}
	if s.skipped == nil {
		s.skipped = map[string]map[uint64]bool{}
	}
	if s.skipped[key] == nil {
		s.skipped[strings.Clone(key)] = map[uint64]bool{}
	}
	s.skipped[key][seq] = true
	in.advance(s, key)
	s.progress = true
	return in.drain(s, nil)
}

// advance moves key's last delivered number past the numbers given up on.
func (in *Inbox) advance(s *inSender, key string) {
	sk := s.skipped[key]
	for sk[s.last[key]+1] {
		delete(sk, s.last[key]+1)
		s.last[key]++
	}
	if len(sk) == 0 {
		delete(s.skipped, key)
	}
	in.closeGap(s, key)
}

// Forget drops a sender (it ended) and what was held of it.
func (in *Inbox) Forget(from string) {
	if s := in.senders[from]; s != nil {
		s.progress = false // nothing to acknowledge if it is in due
		delete(in.senders, from)
	}
}

// Waiting reports whether anything of from is held.
func (in *Inbox) Waiting(from string) bool {
	s := in.senders[from]
	return s != nil && len(s.held) > 0
}

// deliverable: the next on its subject, and every fence on a subject this
// receiver gets is met.
func (in *Inbox) deliverable(s *inSender, m *Msg) bool {
	if m.Seq != s.last[m.Key]+1 {
		return false
	}
	for _, f := range m.Fences {
		if in.subscribed[f.Key] && s.last[f.Key] < f.Seq {
			return false
		}
	}
	return true
}

func (in *Inbox) deliver(s *inSender, m Msg, out []Msg) []Msg {
	in.delivered(s)
	if _, ok := s.last[m.Key]; ok {
		s.last[m.Key] = m.Seq
	} else {
		s.last[strings.Clone(m.Key)] = m.Seq // the key may alias a buffer
	}
	if s.skipped != nil {
		in.advance(s, m.Key)
	}
	if g := s.gaps[m.Key]; g != nil && s.last[m.Key] >= g.upto {
		delete(s.gaps, m.Key)
	}
	return append(out, m)
}

// drain delivers held messages that have become deliverable, until none
// does. Whichever order they go in is right: a message is deliverable only
// once everything before it for this receiver is delivered.
func (in *Inbox) drain(s *inSender, out []Msg) []Msg {
	for progress := true; progress && len(s.held) > 0; {
		progress = false
		for i := 0; i < len(s.held); i++ {
			m := s.held[i]
			if m.Seq <= s.last[m.Key] { // a duplicate of what came since
				s.held = slices.Delete(s.held, i, i+1)
				s.heldBytes -= m.Size
				i--
				continue
			}
			if in.deliverable(s, &m) {
				s.held = slices.Delete(s.held, i, i+1)
				s.heldBytes -= m.Size
				out = in.deliver(s, m, out)
				progress = true
				i--
			}
		}
	}
	return out
}

// noteGaps records what m shows is missing and asks for it.
func (in *Inbox) noteGaps(s *inSender, from string, m *Msg, now time.Time) []Nak {
	var naks []Nak
	// Only what is neither delivered nor held is missing: a message held
	// after a gap does not widen it.
	if hi := s.highest(m.Key); m.Seq > hi+1 {
		naks = in.widen(s, from, m.Key, m.Seq-1, now, naks)
	}
	if m.Seq > s.seen[m.Key] {
		if _, ok := s.seen[m.Key]; ok {
			s.seen[m.Key] = m.Seq
		} else {
			s.seen[strings.Clone(m.Key)] = m.Seq // the key may alias a buffer
		}
	}
	for _, f := range m.Fences {
		if in.subscribed[f.Key] && s.highest(f.Key) < f.Seq {
			naks = in.widen(s, from, f.Key, f.Seq, now, naks)
		}
	}
	return naks
}

// widen records that messages on key up to upto are missing; a gap that
// is new or grows is asked for now.
func (in *Inbox) widen(s *inSender, from, key string, upto uint64, now time.Time, naks []Nak) []Nak {
	g := s.gaps[key]
	if g != nil && g.upto >= upto {
		return naks
	}
	lo := s.highest(key) + 1
	if g != nil {
		lo = max(lo, g.upto+1)
		g.upto = upto
	} else {
		g = &gap{upto: upto}
		s.gaps[strings.Clone(key)] = g
	}
	g.asked, g.tries, g.from = now, 0, s.last[key]+1
	return append(naks, Nak{To: from, Key: key, From: lo, Upto: min(upto, lo+MaxNakSpan-1)})
}

func (in *Inbox) closeGap(s *inSender, key string) {
	if g := s.gaps[key]; g != nil && s.last[key] >= g.upto {
		delete(s.gaps, key)
	}
}
