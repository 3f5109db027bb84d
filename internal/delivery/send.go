package delivery

import (
	"slices"
	"time"

	"github.com/monarch-go/monarch/internal/reliable"
	"github.com/monarch-go/monarch/internal/wire"
)

// Runs. While a burst to one subject lasts, small frames are packed into
// one run (wire.RunWriter) that Run's goroutine sends as soon as it can:
// under load runs grow by themselves, and a frame alone, which does not
// look like a burst, goes out at once without the extra hop. One number
// stamp, one header, one publish and one kept copy serve the whole run;
// the receiver sequences and parses it once.
//
// Order is kept: at most one run is pending, every publish happens under
// outMu in call order, and a frame for another subject (or a large one,
// or one not numbered) first sends the pending run.
const (
	// burstGap: a Send within this time of the previous one is part of a
	// burst.
	burstGap = 20 * time.Microsecond
	// runSmall is the largest payload that joins a run; larger ones are
	// not worth a copy.
	runSmall = 4 << 10
	// runMax bounds a run's bytes.
	runMax = 64 << 10
)

// clockBase anchors the monotonic readings of lastSend.
var clockBase = time.Now()

// pendingRun is the run being packed, for one destination.
type pendingRun struct {
	w     wire.RunWriter
	d     Dest
	parts [2][]byte
	head  []byte
}

// Send publishes a frame whose payload w holds (wire.NewPayload), with
// header h, to d. It does not wait for the bus; it fails only for a frame
// that cannot be sent (too large, a closed link). h's sequencing fields
// are the layer's.
func (l *Layer) Send(w *wire.Writer, h *wire.Header, d Dest) error {
	if w.PayloadSize() > OutOfBand && (d.proc != "" || d.seq != nil) {
		return l.sendLarge(w, h, []Dest{d})
	}
	l.outMu.Lock()
	defer l.outMu.Unlock()
	l.resolve(&d)
	if d.seq != nil && w.PayloadSize() <= runSmall {
		if l.run.w.Count() > 0 {
			if l.run.d.subject == d.subject && l.run.w.Len() < runMax && l.run.w.Count() < wire.MaxRun {
				l.run.w.Add(h, w.Parts())
				return nil
			}
			l.flushRun()
		} else {
			// Read the clock only without a run: a reading per frame is
			// a tenth of its cost.
			now := time.Since(clockBase)
			burst := now-l.lastSend < burstGap
			l.lastSend = now
			if burst {
				l.run.d = d
				l.run.w.Add(h, w.Parts())
				l.kick()
				return nil
			}
		}
	} else {
		l.flushRun()
	}
	return l.sendOne(w, h, d)
}

// SendAll publishes the frame to each of ds, as Send does; the payload is
// encoded once, each gets its own header.
func (l *Layer) SendAll(w *wire.Writer, h *wire.Header, ds []Dest) error {
	if w.PayloadSize() > OutOfBand && !slices.ContainsFunc(ds, func(d Dest) bool { return d.proc == "" && d.seq == nil }) {
		return l.sendLarge(w, h, ds)
	}
	l.outMu.Lock()
	defer l.outMu.Unlock()
	l.flushRun()
	for _, d := range ds {
		l.resolve(&d)
		if err := l.sendOne(w, h, d); err != nil {
			return err
		}
	}
	return nil
}

// sendOne publishes one frame now. Hold outMu, with no run pending.
func (l *Layer) sendOne(w *wire.Writer, h *wire.Header, d Dest) error {
	h.From, h.Seq, h.Fences = "", 0, nil
	now := l.now()
	if d.seq != nil {
		h.From = l.cfg.Self
		h.Seq, h.Fences = l.stamp(d, 1, now)
	}
	parts, err := w.Seal(h)
	if err != nil {
		if d.seq != nil {
			// The number is spent: send it empty, so that nobody waits
			// for it.
			l.sendSkip(d, h.Seq, nil, now)
		}
		return err
	}
	err = l.link.PublishNow(d.subject, parts)
	if d.seq != nil && (err == nil || notSent(err)) {
		// Kept: a frame the link could not take while it was down goes
		// again when its receivers ask.
		l.out.Keep(d.seq, h.Seq, 1, parts, now)
		err = nil
	}
	return err
}

// flushRun sends the pending run, if any. Hold outMu.
func (l *Layer) flushRun() {
	r := &l.run
	n := r.w.Count()
	if n == 0 {
		return
	}
	now := l.now()
	h := wire.Header{Kind: wire.KindRun, From: l.cfg.Self, Rank: -1}
	h.Seq, h.Fences = l.stamp(r.d, n, now)
	head, err := wire.AppendHeader(r.head[:0], &h)
	if err != nil {
		// Not with at most maxFences fences of ids: but the numbers are
		// spent, and nobody must wait for them.
		for i := range uint64(n) {
			l.sendSkip(r.d, h.Seq+i, nil, now)
		}
	} else {
		r.head = head
		r.parts = [2][]byte{head, r.w.Bytes()}
		// Kept whatever the link said: a run was accepted from its
		// senders, and goes again when its receivers ask.
		l.link.PublishNow(r.d.subject, r.parts[:])
		l.out.Keep(r.d.seq, h.Seq, n, r.parts[:], now)
	}
	r.parts = [2][]byte{}
	r.w.Reset(4 * runMax)
	// What comes next within burstGap of this goes on the burst.
	l.lastSend = time.Since(clockBase)
}

// stamp numbers the next frame of n messages to d and gives it its
// fences. Past maxFences, fences go ahead in empty frames on the same
// subject, maxFences each, numbered first: the frame comes after them, so
// after every fence. Hold outMu.
func (l *Layer) stamp(d Dest, n int, now time.Time) (uint64, []wire.Fence) {
	first, fences := l.out.Stamp(d.seq, n, now)
	if most := int(maxFences.Load()); len(fences) > most {
		k := (len(fences) - 1) / most
		l.out.Stamp(d.seq, k, now) // k more numbers: the frame's move up
		for i := range k {
			l.sendSkip(d, first+uint64(i), fences[i*most:(i+1)*most], now)
		}
		fences = fences[k*most:]
		first += uint64(k)
	}
	if len(fences) == 0 {
		return first, nil
	}
	out := make([]wire.Fence, len(fences))
	for i, f := range fences {
		out[i] = wire.Fence{Key: f.Key, Seq: f.Seq}
	}
	return first, out
}

// sendSkip publishes an empty run numbered seq with fences: for a number
// spent on a frame that could not be sent, or to carry fences ahead of a
// frame. Hold outMu.
func (l *Layer) sendSkip(d Dest, seq uint64, fences []reliable.Fence, now time.Time) {
	h := wire.Header{Kind: wire.KindRun, From: l.cfg.Self, Seq: seq, Rank: -1}
	for _, f := range fences {
		h.Fences = append(h.Fences, wire.Fence{Key: f.Key, Seq: f.Seq})
	}
	head, err := wire.AppendHeader(nil, &h)
	if err != nil {
		return
	}
	parts := [][]byte{head}
	l.link.PublishNow(d.subject, parts)
	l.out.Keep(d.seq, seq, 1, parts, now)
}
