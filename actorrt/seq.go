package actorrt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/reliable"
	"github.com/monarch-go/monarch/internal/wire"
)

// Reliable delivery (see internal/reliable). Every frame a runtime sends
// on a proc's or a mesh's subject is sequenced: it carries this proc's
// sequence number on that subject and its fences, and a copy is kept to
// resend. A receiver delivers in sequence and fence order, holds what
// comes early, asks (a NAK) for what is missing, and drops duplicates. So
// a link that drops (a stall, a leaf's link cut for a few seconds, the
// hub's listener restarting) and comes back loses, repeats and reorders
// no actor message. What a sender no longer holds when asked is given up
// on and reported: calls waiting on that sender fail, and this proc's
// actors fail (their owners hear of it).
//
// Frames to standalone host agents (h0, h1, ...) and the transport's own
// frames (NAKs, resends, tails, heartbeats) are not sequenced.

// Bounds of the history kept to resend, and of what a receiver holds.
const (
	seqRetainMin = 12 * time.Second // past the last tail marker
	seqKeepBytes = 256 << 20
	seqHoldBytes = 256 << 20
	seqTick      = 100 * time.Millisecond
)

// maxFences bounds the fences a frame carries (a few KiB of header): more
// go ahead of it in empty frames. A variable for the tests.
var maxFences = 64

// sequencer is a runtime's reliable-delivery state: the outbox of what it
// sends and the inbox of what it receives.
type sequencer struct {
	// clock is now, to a tick (seqTick): what the outbox and inbox need
	// of the time, without a clock reading per message.
	clock atomic.Int64

	// outMu is held from stamping a frame to publishing it, so that
	// frames leave in the order of their numbers.
	outMu sync.Mutex
	out   *reliable.Outbox
	procs map[string]*reliable.Subject // proc subjects by proc id

	inMu sync.Mutex
	in   *reliable.Inbox
	// What the dispatcher owes senders (NAKs for the gaps it found,
	// acknowledgements due before the tick) goes out from answerLoop:
	// a publish may wait on a stalled link, and the dispatcher must not.
	naks   []reliable.Nak // under inMu; at most maxNews
	answer chan struct{}

	// What the dispatcher hears for the outbox (acknowledgements, NAKs,
	// procs gone) waits in news for whoever holds outMu next: a sender
	// blocked on a stalled link holds outMu, and the dispatcher must not
	// wait for it (its queue would overflow meanwhile).
	newsMu  sync.Mutex
	news    outNews
	hasNews atomic.Bool
}

// outNews is what the outbox has yet to hear.
type outNews struct {
	acks map[ackKey]uint64 // the highest number acknowledged
	naks []nakFrom
	gone []string
}

type ackKey struct{ from, key string }

type nakFrom struct {
	from string
	req  wire.NakReq
}

// inLimits are the inbox's bounds; it gives up on a gap unanswered for
// twice what senders keep (retain), when no sender could still hold it.
func inLimits(retain time.Duration) reliable.InLimits {
	l := reliable.DefaultInLimits
	l.GiveUp = 2 * max(retain, seqRetainMin)
	return l
}

// maxNews bounds the NAKs waiting: past it, a NAK is dropped (its sender
// asks again after reliable.NakRetry).
const maxNews = 4096

func newSequencer(self string, retain time.Duration) *sequencer {
	s := &sequencer{
		out:    reliable.NewOutbox(reliable.Limits{Retain: max(retain, seqRetainMin), MaxBytes: seqKeepBytes}),
		procs:  map[string]*reliable.Subject{},
		in:     reliable.NewInbox(inLimits(retain)),
		answer: make(chan struct{}, 1),
	}
	s.clock.Store(time.Now().UnixNano())
	s.in.Subscribe(jobenv.ProcKey(self))
	return s
}

// now is the sequencer's clock.
func (s *sequencer) now() time.Time { return time.Unix(0, s.clock.Load()) }

// procSubject is proc's subject as the outbox knows it; nil for a
// standalone host agent, whose frames are not sequenced. Hold outMu.
func (s *sequencer) procSubject(proc string) *reliable.Subject {
	if jobenv.IsAgentID(proc) {
		return nil
	}
	rs := s.procs[proc]
	if rs == nil {
		rs = &reliable.Subject{Key: jobenv.ProcKey(proc), Proc: proc}
		s.procs[proc] = rs
	}
	return rs
}

// meshSubject is a mesh's subject as the outbox knows it, made once.
func (r *meshRef) seqSubject() *reliable.Subject {
	r.rsOnce.Do(func() {
		g := make(map[string]bool, len(r.all))
		for _, p := range r.all {
			g[p] = true
		}
		r.rs = &reliable.Subject{Key: jobenv.MeshKey(r.id), Group: g}
	})
	return r.rs
}

// sendSeq publishes a frame whose payload w holds (NewPayload), with
// header h, on each destination: the subject, sequenced on rs (nil: not
// sequenced). The payload is encoded once; each destination gets its own
// header.
func (n *node) sendSeq(w *wire.Writer, h *wire.Header, dests ...seqDest) error {
	s := n.seq
	s.outMu.Lock()
	defer s.outMu.Unlock()
	n.takeNews()
	now := s.now()
	for _, d := range dests {
		rs := d.rs
		if rs == nil && d.proc != "" {
			rs = s.procSubject(d.proc)
		}
		h.From, h.Seq, h.Fences = "", 0, nil
		if rs != nil {
			seq, fences := s.out.Stamp(rs, 1, now)
			// Past maxFences, fences go ahead in empty frames on the
			// same subject, maxFences each: this one comes after them,
			// so after every fence.
			for len(fences) > maxFences {
				n.sendSkip(d.subject, rs, seq, fences[:maxFences])
				fences = fences[maxFences:]
				seq, _ = s.out.Stamp(rs, 1, now)
			}
			h.From, h.Seq = n.procID, seq
			for _, f := range fences {
				h.Fences = append(h.Fences, wire.Fence{Key: f.Key, Seq: f.Seq})
			}
		}
		parts, err := w.Seal(h)
		if err != nil {
			if rs != nil {
				// The number is spent: send it empty, so that nobody
				// waits for it.
				n.sendSkip(d.subject, rs, h.Seq, nil)
			}
			return err
		}
		err = n.publishParts(d.subject, parts)
		if rs != nil && (err == nil || errors.Is(err, bus.ErrNotSent)) {
			// Kept: a frame the link could not take while it was down
			// goes again when its receivers ask.
			s.out.Keep(rs, h.Seq, 1, parts, now)
			err = nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// seqDest is one destination of sendSeq: a subject, and how it is
// sequenced: rs, or the proc subject of proc, or not at all.
type seqDest struct {
	subject string
	rs      *reliable.Subject
	proc    string
}

// toProc is the destination of proc's own subject.
func (n *node) toProc(proc string) seqDest {
	return seqDest{subject: n.subjects.Proc(proc), proc: proc}
}

// sendSkip publishes an empty frame with number seq and fences: for a
// number that was spent on a frame that could not be sent, or to carry
// fences ahead of a frame. Hold outMu.
func (n *node) sendSkip(subject string, rs *reliable.Subject, seq uint64, fences []reliable.Fence) {
	h := wire.Header{Kind: wire.KindControl, Method: opSkip, From: n.procID, Seq: seq, Rank: -1}
	for _, f := range fences {
		h.Fences = append(h.Fences, wire.Fence{Key: f.Key, Seq: f.Seq})
	}
	w := wire.NewPayload(&h, n.link.MaxMessage())
	defer w.Free()
	w.Enc.EncodeNil()
	if parts, err := w.Seal(&h); err == nil {
		n.publishParts(subject, parts)
		n.seq.out.Keep(rs, seq, 1, parts, n.seq.now())
	}
}

// opSkip is a control frame that carries nothing but its number.
const opSkip = "skip"

// sequenced takes a sequenced frame that came on subject (key): it is
// routed now, after frames it freed, or held until what it needs comes.
func (rt *core) sequenced(f *wire.Frame, key, subject string, size int) {
	if !wire.ValidID(f.From) || key == "" {
		rt.drop(wire.DropIDs, subject, fmt.Errorf("a sequenced frame from %.40q on %.40q", f.From, subject))
		return
	}
	s := rt.seq
	var fences []reliable.Fence
	for _, fe := range f.Fences {
		fences = append(fences, reliable.Fence{Key: fe.Key, Seq: fe.Seq})
	}
	s.inMu.Lock()
	if s.in.Next(f.From, key, f.Seq, 1, fences) {
		// The common case: in order, nothing waiting.
		s.owe(nil)
		s.inMu.Unlock()
		rt.route(f, subject)
		return
	}
	held := *f // it may wait: on the heap
	msg := reliable.Msg{From: f.From, Key: key, Seq: f.Seq, N: 1, Fences: fences, Size: size, Payload: &held}
	e := s.in.Receive(msg, s.now())
	s.owe(e.Naks)
	s.inMu.Unlock()
	rt.seqEffects(e)
}

// seqEffects carries out what the inbox asked, but the NAKs (owed).
func (rt *core) seqEffects(e reliable.Effects) {
	for _, l := range e.Lost {
		rt.lost(l.From, l.Key, fmt.Sprintf("messages %d..%d on %s: %s", l.Lo, l.Hi, l.Key, l.Why))
	}
	for _, m := range e.Deliver {
		rt.route(m.Payload.(*wire.Frame), rt.subjects.Of(m.Key))
	}
	for _, d := range e.Dropped {
		rt.drop(wire.DropIDs, "", fmt.Errorf("sequenced frames from %.40q: %s", d.From, d.Why))
	}
}

// tail takes a tail marker: a gap it shows is asked for.
func (rt *core) tail(f *wire.Frame, key string) {
	s := rt.seq
	if !wire.ValidID(f.From) {
		rt.drop(wire.DropIDs, key, fmt.Errorf("a tail marker from %.40q", f.From))
		return
	}
	s.inMu.Lock()
	e := s.in.Tail(f.From, key, f.Seq, time.Now())
	s.owe(e.Naks)
	s.inMu.Unlock()
	rt.seqEffects(e)
}

// owe notes NAKs to send, and wakes answerLoop if there are any or
// acknowledgements are due. Past maxNews waiting, a NAK is dropped: the
// gap is asked for again at a tick. Hold inMu.
func (s *sequencer) owe(naks []reliable.Nak) {
	if len(naks) == 0 && !s.in.AcksDue() {
		return
	}
	s.naks = append(s.naks, naks[:min(len(naks), maxNews-len(s.naks))]...)
	select {
	case s.answer <- struct{}{}:
	default:
	}
}

// answerLoop sends what the dispatcher owes senders, until ctx ends.
func (rt *core) answerLoop(ctx context.Context) {
	s := rt.seq
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.answer:
		}
		s.inMu.Lock()
		naks := s.naks
		s.naks = nil
		acks := s.dueAcks()
		s.inMu.Unlock()
		rt.sendNaks(naks)
		rt.sendAcks(acks)
	}
}

// resent takes a frame sent again on request: it goes the way it would
// have, on the subject it was first sent on.
func (rt *core) resent(f *wire.Frame, subject string) {
	inner, err := wire.Parse(f.Payload)
	if err != nil || inner.Seq == 0 || f.Target == "" {
		rt.drop(wire.DropFrame, subject, fmt.Errorf("a resent frame that does not hold one: %v", err))
		return
	}
	rt.sequenced(&inner, f.Target, subject, len(f.Payload))
}

// sendNaks asks the senders for what is missing.
func (rt *core) sendNaks(naks []reliable.Nak) {
	for _, k := range naks {
		rt.sendControlUnsequenced(k.To, wire.OpNak, &wire.NakReq{Key: k.Key, From: k.Lo, Upto: k.Hi})
	}
}

// nak takes a receiver's NAK; takeNews answers it.
func (rt *core) nak(from string, req *wire.NakReq) {
	s := rt.seq
	s.newsMu.Lock()
	if len(s.news.naks) < maxNews {
		req.Key = strings.Clone(req.Key) // it may alias a received buffer
		s.news.naks = append(s.news.naks, nakFrom{strings.Clone(from), *req})
		s.hasNews.Store(true)
	}
	s.newsMu.Unlock()
}

// resend answers a receiver's NAK: what this proc still holds, sent again
// to it; what it does not, said so. Hold outMu.
func (n *node) resend(from string, req *wire.NakReq) {
	a := n.seq.out.Nak(from, req.Key, req.From, req.Upto)
	for _, fr := range a.Frames {
		h := wire.Header{Kind: wire.KindResend, Target: req.Key, From: n.procID, Rank: -1}
		w := wire.NewPayload(&h, n.link.MaxMessage()+len(fr))
		w.Enc.Writer().Write(fr)
		if parts, err := w.Seal(&h); err == nil {
			n.publishParts(n.subjects.Proc(from), parts)
		}
		w.Free()
	}
	for _, r := range a.Missing {
		n.sendControlUnsequenced(from, wire.OpNakMissing, &wire.NakMissing{Key: req.Key, From: r.Lo, Upto: r.Hi})
	}
}

// takeNews applies what the dispatcher heard for the outbox. Hold outMu.
func (n *node) takeNews() {
	s := n.seq
	if !s.hasNews.Load() {
		return
	}
	s.newsMu.Lock()
	news := s.news
	s.news = outNews{}
	s.hasNews.Store(false)
	s.newsMu.Unlock()
	for k, seq := range news.acks {
		s.out.Ack(k.from, k.key, seq)
	}
	for _, p := range news.gone {
		s.out.Forget(jobenv.ProcKey(p))
		s.out.ProcGone(p)
		delete(s.procs, p)
	}
	for _, k := range news.naks {
		n.resend(k.from, &k.req)
	}
}

// nakMissing takes a sender's answer that it no longer holds what was
// asked for: only what this proc still misses is given up on.
func (rt *core) nakMissing(from string, m *wire.NakMissing) {
	s := rt.seq
	s.inMu.Lock()
	e := s.in.Missing(from, m.Key, max(m.From, 1), m.Upto, s.now())
	s.owe(e.Naks)
	s.inMu.Unlock()
	rt.seqEffects(e)
}

// lost reports messages from proc from that cannot be delivered: never
// silently. Calls waiting on that proc fail; this proc's actors, any of
// which the lost message may have been for, fail, and their owners hear
// why.
func (rt *core) lost(from, key, why string) {
	err := fmt.Errorf("%w: proc %s lost messages from proc %s: %s", ErrBus, rt.procID, from, why)
	rt.log.Error().Err(err).Msg("messages lost")
	rt.ports.failWaiting(from, err)
	rt.actors.failAll(err.Error())
}

// seqTicker sends the tail markers due and asks again for what is still
// missing, until the runtime ends.
func (rt *core) seqTicker(ctx context.Context) {
	t := time.NewTicker(seqTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		s := rt.seq
		s.clock.Store(now.UnixNano())
		s.outMu.Lock()
		rt.takeNews()
		tails := s.out.Tick(now)
		s.outMu.Unlock()
		for _, tl := range tails {
			h := wire.Header{Kind: wire.KindTail, Target: tl.Key, From: rt.procID, Seq: tl.Seq, Rank: -1}
			rt.publishTransport(rt.subjects.Of(tl.Key), &h)
		}
		s.inMu.Lock()
		e := s.in.Tick(now)
		acks := s.in.Acks(now)
		s.inMu.Unlock()
		rt.seqEffects(e)
		rt.sendNaks(e.Naks)
		rt.sendAcks(acks)
	}
}

// dueAcks returns the acknowledgements owed before the tick: a fast
// sender keeps only a few thousand messages. Hold inMu.
func (s *sequencer) dueAcks() []reliable.Ack {
	if !s.in.AcksDue() {
		return nil
	}
	return s.in.DueAcks()
}

// sendAcks tells the senders what has come: one message to each.
func (rt *core) sendAcks(acks []reliable.Ack) {
	if len(acks) == 0 {
		return
	}
	by := map[string]*wire.AckReq{}
	for _, a := range acks {
		req := by[a.To]
		if req == nil {
			req = &wire.AckReq{}
			by[a.To] = req
		}
		req.Keys = append(req.Keys, a.Key)
		req.Seqs = append(req.Seqs, a.Seq)
	}
	for to, req := range by {
		rt.sendControlUnsequenced(to, wire.OpAck, req)
	}
}

// ack takes a receiver's acknowledgement: what it has is not kept any
// more, once takeNews applies it.
func (rt *core) ack(from string, req *wire.AckReq) {
	s := rt.seq
	s.newsMu.Lock()
	if s.news.acks == nil {
		s.news.acks = map[ackKey]uint64{}
	}
	for i, key := range req.Keys {
		k := ackKey{from, key}
		if old, ok := s.news.acks[k]; !ok {
			// The strings may alias a received buffer.
			s.news.acks[ackKey{strings.Clone(from), strings.Clone(key)}] = req.Seqs[i]
		} else if req.Seqs[i] > old {
			s.news.acks[k] = req.Seqs[i]
		}
	}
	s.hasNews.Store(true)
	s.newsMu.Unlock()
}

// publishTransport publishes a transport frame with no payload (a tail
// marker: its Seq is the sender's last number on the subject, which the
// dispatcher reads as such by its kind).
func (rt *core) publishTransport(subject string, h *wire.Header) {
	w := wire.NewPayload(h, rt.link.MaxMessage())
	defer w.Free()
	if parts, err := w.Seal(h); err == nil {
		rt.publishParts(subject, parts)
	}
}

// sendControlUnsequenced sends a transport control op to a proc.
func (n *node) sendControlUnsequenced(proc, op string, body any) {
	h := wire.Header{Kind: wire.KindControl, Method: op, ReplyTo: n.procID, Rank: -1}
	w := wire.NewPayload(&h, n.link.MaxMessage())
	defer w.Free()
	if err := w.Enc.Encode(body); err != nil {
		return
	}
	if parts, err := w.Seal(&h); err == nil {
		n.publishParts(n.subjects.Proc(proc), parts)
	}
}

// forgetProc drops what this proc keeps for and of a proc that ended
// (what it keeps for it, once takeNews applies it).
func (rt *core) forgetProc(proc string) {
	s := rt.seq
	s.newsMu.Lock()
	s.news.gone = append(s.news.gone, proc)
	s.hasNews.Store(true)
	s.newsMu.Unlock()
	s.inMu.Lock()
	s.in.Forget(proc)
	s.inMu.Unlock()
}
