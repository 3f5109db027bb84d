package delivery

import (
	"fmt"
	"strings"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/reliable"
	"github.com/monarch-go/monarch/internal/wire"
)

// Receive takes a frame off the bus, on the dispatcher: the layer's own
// frames it acts on; a numbered frame it routes now if it is due, with
// what it freed, or holds; any other it routes as it is. A frame it cannot
// read, or whose ids do not check, is dropped (Config.Drop). Call it from
// one goroutine, in the order the link delivers.
func (l *Layer) Receive(m bus.Message) {
	// One frame for every message: Receive runs on one goroutine, and
	// what keeps a frame copies it.
	f := &l.recvFrame
	var err error
	if *f, err = wire.Parse(m.Data); err != nil {
		l.cfg.Drop(wire.DropFrame, m.Subject, err)
		return
	}
	switch {
	case f.Kind == wire.KindTail:
		l.tail(f, m.Subject)
	case f.Kind == wire.KindResend:
		l.resent(f, m.Subject)
	case f.Kind == wire.KindNak:
		l.nak(f, m.Subject)
	case f.Kind == wire.KindAck:
		l.ack(f, m.Subject)
	case f.Kind == wire.KindRelease:
		l.release(f, m.Subject)
	case f.Seq != 0:
		l.sequenced(f, l.cfg.Subjects.Key(m.Subject), m.Subject, len(m.Data))
	case f.Kind == wire.KindRun:
		l.cfg.Drop(wire.DropFrame, m.Subject, fmt.Errorf("a run with no sequence number from %.40q", f.ReplyTo))
	case f.Flags&wire.FlagOutOfBand != 0:
		l.cfg.Drop(wire.DropPayload, m.Subject, fmt.Errorf("a payload out of band in a frame not numbered, from %.40q", f.ReplyTo))
	default:
		l.inMu.Lock()
		l.cfg.Route(f, m.Subject)
		l.unlockIn()
	}
}

// sequenced takes a numbered frame that came on subject (key): routed
// now, with what it freed, or held until what it needs comes.
func (l *Layer) sequenced(f *wire.Frame, key, subject string, size int) {
	if !wire.ValidID(f.From) || !wire.ValidKey(key) {
		l.cfg.Drop(wire.DropIDs, subject, fmt.Errorf("a numbered frame from %.40q on %.40q", f.From, subject))
		return
	}
	n := 1
	if f.Kind == wire.KindRun && len(f.Payload) > 0 {
		var err error
		if n, err = wire.CountRun(f.Payload); err != nil {
			l.cfg.Drop(wire.DropFrame, subject, fmt.Errorf("a run from %s: %w", f.From, err))
			return
		}
	}
	if f.Seq+uint64(n)-1 < f.Seq {
		l.cfg.Drop(wire.DropFrame, subject, fmt.Errorf("a frame from %s numbered %d (+%d)", f.From, f.Seq, n))
		return
	}
	var fences []reliable.Fence
	if len(f.Fences) > 0 {
		fences = make([]reliable.Fence, len(f.Fences))
		for i, fe := range f.Fences {
			fences[i] = reliable.Fence{Key: fe.Key, Seq: fe.Seq}
		}
	}
	l.inMu.Lock()
	defer l.unlockIn()
	naks := l.takeIn()
	if l.in.Next(f.From, key, f.Seq, n, fences) {
		// The common case: in order, nothing waiting.
		l.route(f, subject, 0)
	} else {
		held := *f // it may wait: on the heap
		msg := reliable.Msg{From: f.From, Key: key, Seq: f.Seq, N: n, Fences: fences, Size: size, Payload: &held}
		e := l.in.Receive(msg, l.now())
		l.effects(e)
		naks = append(naks, e.Naks...)
	}
	l.owe(naks)
}

// route routes a delivered frame: each message of a run past the first
// skip ones (delivered before), or the frame. Hold inMu.
func (l *Layer) route(f *wire.Frame, subject string, skip int) {
	if f.Kind != wire.KindRun {
		l.deliver(f.From, f, subject)
		return
	}
	r := wire.ReadRun(f.Payload) // an empty run is a skipped number
	mf := &l.runFrame            // one for every message: Route keeps no pointer to it
	for i := 0; ; i++ {
		var ok bool
		var err error
		*mf, ok, err = r.Next()
		switch {
		case !ok:
			*mf = wire.Frame{}
			return
		case i < skip:
		case err != nil:
			l.cfg.Drop(wire.DropFrame, subject, fmt.Errorf("a run from %s: message %d: %w", f.From, i+1, err))
		default:
			l.deliver(f.From, mf, subject)
		}
	}
}

// effects carries out what the inbox asked, but the NAKs. Hold inMu.
func (l *Layer) effects(e reliable.Effects) {
	for _, lo := range e.Lost {
		l.cfg.Lost(lo.From, lo.Key, fmt.Sprintf("messages %d..%d on %s: %s", lo.Lo, lo.Hi, lo.Key, lo.Why))
	}
	for _, m := range e.Deliver {
		l.route(m.Payload.(*wire.Frame), l.cfg.Subjects.Of(m.Key), m.Skip)
	}
	for _, d := range e.Dropped {
		err := fmt.Errorf("numbered frames from %.40q (%d held): %s", d.From, d.Held, d.Why)
		l.cfg.Drop(wire.DropSender, "", err)
	}
	for _, id := range e.Ask {
		if l.cfg.Ask == nil {
			l.in.Judged(id, reliable.Stranger)
			continue
		}
		l.cfg.Ask(id)
	}
}

// owe notes NAKs to send, and wakes Run if there are any or
// acknowledgements are due. Past maxNews waiting, a NAK is dropped: the
// gap is asked for again at a tick. Hold inMu.
func (l *Layer) owe(naks []reliable.Nak) {
	if len(naks) == 0 && !l.in.AcksDue() {
		return
	}
	l.owedNaks = append(l.owedNaks, naks[:min(len(naks), maxNews-len(l.owedNaks))]...)
	l.kick()
}

// tail takes a tail marker: a gap it shows is asked for.
func (l *Layer) tail(f *wire.Frame, subject string) {
	key := l.cfg.Subjects.Key(subject)
	if !wire.ValidID(f.From) || !wire.ValidKey(key) || f.Seq == 0 {
		l.cfg.Drop(wire.DropIDs, subject, fmt.Errorf("a tail marker from %.40q on %.40q", f.From, subject))
		return
	}
	l.inMu.Lock()
	defer l.unlockIn()
	naks := l.takeIn()
	e := l.in.Tail(f.From, key, f.Seq, l.now())
	l.effects(e)
	l.owe(append(naks, e.Naks...))
}

// resent takes a frame sent again on request: it goes the way it would
// have, on the subject it was first sent on (Target).
func (l *Layer) resent(f *wire.Frame, subject string) {
	inner := &l.resentFrame // on Receive's goroutine, as recvFrame
	var err error
	*inner, err = wire.Parse(f.Payload)
	switch {
	case err != nil:
		l.cfg.Drop(wire.DropFrame, subject, fmt.Errorf("a resent frame that does not hold one: %w", err))
		return
	case !wire.ValidKey(f.Target) || inner.Seq == 0 || inner.From != f.ReplyTo:
		l.cfg.Drop(wire.DropIDs, subject, fmt.Errorf("a frame of %.40q resent on %.40q by %.40q", inner.From, f.Target, f.ReplyTo))
		return
	}
	l.sequenced(inner, f.Target, l.cfg.Subjects.Of(f.Target), len(f.Payload))
}

// nak takes a receiver's NAK, for Run to answer, or a sender's answer
// that it no longer holds what was asked for, for the inbox.
func (l *Layer) nak(f *wire.Frame, subject string) {
	if !wire.ValidID(f.ReplyTo) || !wire.ValidKey(f.Target) {
		l.cfg.Drop(wire.DropIDs, subject, fmt.Errorf("a NAK of %.40q from %.40q", f.Target, f.ReplyTo))
		return
	}
	span, err := wire.ReadSpan(f.Payload)
	if err != nil {
		l.cfg.Drop(wire.DropBody, subject, fmt.Errorf("a NAK from %s: %w", f.ReplyTo, err))
		return
	}
	if f.Flags&wire.FlagMissing != 0 {
		l.inMu.Lock()
		defer l.unlockIn()
		naks := l.takeIn()
		e := l.in.Missing(f.ReplyTo, f.Target, span.Lo, span.Hi, l.now())
		l.effects(e)
		l.owe(append(naks, e.Naks...))
		return
	}
	l.newsMu.Lock()
	if len(l.outNews.naks) < maxNews {
		// Copies: the frame's strings alias a received buffer.
		l.outNews.naks = append(l.outNews.naks, nakFrom{strings.Clone(f.ReplyTo), strings.Clone(f.Target), span})
		l.hasOut.Store(true)
	}
	l.newsMu.Unlock()
	l.kick()
}

// ack takes a receiver's acknowledgement: what it has is not kept any
// more, once Run applies it.
func (l *Layer) ack(f *wire.Frame, subject string) {
	if !wire.ValidID(f.ReplyTo) {
		l.cfg.Drop(wire.DropIDs, subject, fmt.Errorf("an acknowledgement from %.40q", f.ReplyTo))
		return
	}
	acks, err := wire.ReadAcks(f.Payload)
	if err != nil {
		l.cfg.Drop(wire.DropBody, subject, fmt.Errorf("an acknowledgement from %s: %w", f.ReplyTo, err))
		return
	}
	l.newsMu.Lock()
	if l.outNews.acks == nil {
		l.outNews.acks = map[ackKey]uint64{}
	}
	for i, key := range acks.Keys {
		k := ackKey{f.ReplyTo, key}
		if old, ok := l.outNews.acks[k]; !ok {
			if len(l.outNews.acks) < maxNews {
				l.outNews.acks[ackKey{strings.Clone(f.ReplyTo), strings.Clone(key)}] = acks.Seqs[i]
			}
		} else if acks.Seqs[i] > old {
			l.outNews.acks[k] = acks.Seqs[i]
		}
	}
	l.hasOut.Store(true)
	l.newsMu.Unlock()
	l.kick()
}
