package delivery

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/reliable"
	"github.com/monarch-go/monarch/internal/wire"
)

// Link is what the layer needs of the bus (bus.Conn is one): publishing a
// frame given as parts, at once, in call order (the layer batches
// itself). A frame the link cannot take while it is down is an error
// wrapping bus.ErrNotSent: the layer keeps it, and sends it again when
// its receivers ask.
type Link interface {
	PublishNow(subject string, parts [][]byte) error
}

// Config is what a Layer is for: the process it sends from, the job whose
// subjects it uses, and the runtime's side of what arrives.
type Config struct {
	Self     string          // this process's proc id
	Subjects jobenv.Subjects // the job's subjects
	// Retain is how long a frame is kept to send again (at least
	// MinRetain); a receiver gives up on a gap its sender does not answer
	// for twice that.
	Retain time.Duration
	// Route acts on a frame, in the order it is due: it is called with
	// the Layer's receive lock held, one frame at a time. f is valid for
	// the call only: Route copies what it keeps. It must not block on
	// the bus.
	Route func(f *wire.Frame, subject string)
	// Lost reports messages of from on key that will never be delivered
	// (called like Route, before what they held back is routed).
	Lost func(from, key, why string)
	// Flush, if set, is called after each batch of Route calls, before
	// the receive lock is let go: a runtime that gathers what Route gives
	// it (one lock per actor per run, not per message) hands it on here.
	Flush func()
	// Drop counts a malformed or refused frame.
	Drop func(kind wire.DropKind, subject string, err error)
	// Failed is called, like Route, for a frame whose payload was sent
	// out of band and cannot be read (gone, or not what the frame says):
	// whoever waits for an answer to it should get err. f has no payload.
	Failed func(f *wire.Frame, subject string, err error)
	// MaxPayload bounds a payload read out of band (the largest message
	// a sender may send).
	MaxPayload int
	// Standing says what this process knows of a sender's place in the
	// job when the layer first hears from it: only a
	// member's word that it no longer holds messages makes them lost,
	// and strangers are forgotten first when the sender table is full.
	// It is called with the receive lock held and must not block. Nil:
	// every sender is a member.
	Standing func(id string) Standing
	// Ask, called like Route, asks whether id, a sender whose standing
	// was Unknown and whose first message was just delivered, is in the
	// job; the answer comes back through Judged. Nil: such a sender is a
	// stranger.
	Ask func(id string)
}

// Standing is what a process knows of a sender's place in the job
// (reliable.Standing), for Config.Standing and Judged.
type Standing = reliable.Standing

// The standings.
const (
	Unknown  = reliable.Unknown
	Member   = reliable.Member
	Stranger = reliable.Stranger
)

// Bounds of what a layer keeps and does.
const (
	// MinRetain is the least time a frame is kept to send again.
	MinRetain = 12 * time.Second
	// KeepBytes bounds the bytes of frames kept to send again; frames
	// over a tenth of it are not kept (reliable.Limits).
	KeepBytes = 256 << 20
	// Tick is how often the layer sends tail markers, asks again for
	// what is missing, and acknowledges.
	Tick = 100 * time.Millisecond
	// maxNews bounds the NAKs and answers waiting to be acted on; past
	// it one is dropped (its receiver asks again after a NakRetry).
	maxNews = 4096
)

// Layer is one process's reliable delivery: every frame it sends on a
// proc's or a mesh's subject is numbered, kept until its receivers have
// it, and sent again when they ask; every such frame it receives is
// delivered in order, once, or held until what comes before it arrives.
// Frames for standalone host agents and subjects that are neither go
// through as they are. A burst of small frames to one subject travels as
// one run. Safe for concurrent use.
type Layer struct {
	cfg     Config
	link    Link
	selfKey string

	// clock is now, to a Tick: what the outbox needs of the time per
	// frame, without a clock reading per frame.
	clock atomic.Int64

	// outMu is held from numbering a frame to publishing it, so that
	// frames leave in the order of their numbers.
	outMu    sync.Mutex
	out      *reliable.Outbox
	procs    map[string]*procDest // by proc id
	run      pendingRun
	lastSend time.Duration // since clockBase, when no run was pending

	// inMu is held from an inbox step to the end of routing what it
	// delivered, so that frames are routed in the order they are due.
	// Never take outMu and then inMu.
	inMu        sync.Mutex
	in          *reliable.Inbox
	owedNaks    []reliable.Nak
	parked      map[string]*parkedSender // senders whose frames wait behind a payload being read
	parkedBytes int                      // of the frames waiting there, all senders
	runFrame    wire.Frame               // the message of a run being routed

	// The frames Receive parses into, on its one goroutine.
	recvFrame, resentFrame wire.Frame

	pool    *oobPool      // payloads this process sent out of band
	fetches chan struct{} // payloads being read here

	// What others hear for the inbox and for the outbox waits here for
	// whoever holds the lock next: the dispatcher must not wait for a
	// sender blocked on a stalled link, and Route may call in again.
	newsMu  sync.Mutex
	inNews  inNews
	outNews outNews
	hasIn   atomic.Bool
	hasOut  atomic.Bool
	wake    chan struct{} // Run: news for the outbox, a run to send, NAKs owed
}

// inNews is what the inbox has yet to hear.
type inNews struct {
	subs   []string // keys subscribed
	gone   []string // procs that ended
	judged []judged // what was found out about senders asked about
	linkUp bool
}

type judged struct {
	id       string
	standing Standing
}

// outNews is what the outbox has yet to hear.
type outNews struct {
	acks   map[ackKey]uint64 // the highest number acknowledged
	naks   []nakFrom
	gone   []string
	linkUp bool
}

type ackKey struct{ from, key string }

type nakFrom struct {
	from, key string
	span      wire.Span
}

// New makes the layer of process cfg.Self on link. Run must run for it to
// send tail markers, answer NAKs and acknowledge.
func New(cfg Config, link Link) *Layer {
	retain := max(cfg.Retain, MinRetain)
	lim := reliable.DefaultInLimits
	lim.GiveUp = 2 * retain
	if cfg.Standing == nil {
		cfg.Standing = func(string) Standing { return Member }
	}
	l := &Layer{
		cfg: cfg, link: link, selfKey: jobenv.ProcKey(cfg.Self),
		out:   reliable.NewOutbox(reliable.Limits{Retain: retain, MaxBytes: KeepBytes}),
		procs: map[string]*procDest{},
		in:    reliable.NewInbox(lim, cfg.Standing),
		wake:  make(chan struct{}, 1),

		parked:  map[string]*parkedSender{},
		pool:    newOOBPool(),
		fetches: make(chan struct{}, oobFetches),
	}
	l.clock.Store(time.Now().UnixNano())
	l.in.Subscribe(l.selfKey)
	return l
}

// now is the layer's clock.
func (l *Layer) now() time.Time { return time.Unix(0, l.clock.Load()) }

// Dest is where a frame goes: a subject, and how it is numbered there.
type Dest struct {
	subject string
	seq     *reliable.Subject // nil: not numbered (unless proc is set)
	proc    string            // a proc's inbox: subject and numbering found at the send
}

// Unsequenced is a subject whose frames are not numbered (deaths,
// heartbeats, a standalone agent's inbox).
func Unsequenced(subject string) Dest { return Dest{subject: subject} }

// ToProc is proc's inbox. Frames for a standalone host agent are not
// numbered (it keeps no inbox).
func (l *Layer) ToProc(proc string) Dest {
	if jobenv.IsAgentID(proc) {
		return Dest{subject: l.cfg.Subjects.Proc(proc)}
	}
	return Dest{proc: proc}
}

// resolve fills in a proc's subject and numbering, made once per proc.
// Hold outMu.
func (l *Layer) resolve(d *Dest) {
	if d.proc == "" {
		return
	}
	p := l.procs[d.proc]
	if p == nil {
		proc := strings.Clone(d.proc)
		p = &procDest{subject: l.cfg.Subjects.Proc(proc), seq: &reliable.Subject{Key: jobenv.ProcKey(proc), Proc: proc}}
		l.procs[proc] = p
	}
	d.subject, d.seq = p.subject, p.seq
}

// procDest is a proc's inbox as the layer sends to it.
type procDest struct {
	subject string
	seq     *reliable.Subject
}

// ToGroup is a mesh's subject, received by procs; make it once per mesh.
func ToGroup(subjects jobenv.Subjects, mesh string, procs []string) Dest {
	g := make(map[string]bool, len(procs))
	for _, p := range procs {
		g[p] = true
	}
	return Dest{subject: subjects.Mesh(mesh), seq: &reliable.Subject{Key: jobenv.MeshKey(mesh), Group: g}}
}

// Subscribe says this process receives the subject key (a mesh it hosts
// members of): call it before subscribing to the subject, so that what
// comes on it counts.
func (l *Layer) Subscribe(key string) {
	l.newsMu.Lock()
	l.inNews.subs = append(l.inNews.subs, strings.Clone(key))
	l.hasIn.Store(true)
	l.newsMu.Unlock()
}

// ProcGone says a proc ended: nothing more is kept for it or held of it,
// and meshes no longer wait for its acknowledgements.
func (l *Layer) ProcGone(proc string) {
	proc = strings.Clone(proc)
	l.pool.procGone(proc)
	l.newsMu.Lock()
	l.inNews.gone = append(l.inNews.gone, proc)
	l.outNews.gone = append(l.outNews.gone, proc)
	l.hasIn.Store(true)
	l.hasOut.Store(true)
	l.newsMu.Unlock()
	l.kick()
}

// Judged says what was found out about a sender Config.Ask asked about:
// a member's word on what it no longer holds counts from now on; a
// stranger is forgotten first when the sender table is full, and at once
// if it was taken for a member.
func (l *Layer) Judged(id string, standing Standing) {
	l.newsMu.Lock()
	// Not bounded: one answer per sender asked about, and the inbox asks
	// about at most InLimits.Strangers at once.
	l.inNews.judged = append(l.inNews.judged, judged{strings.Clone(id), standing})
	l.hasIn.Store(true)
	l.newsMu.Unlock()
	l.kick()
}

// LinkUp says the link came back after a drop: every gap is asked for,
// and a tail marker sent for every subject not fully acknowledged, now.
func (l *Layer) LinkUp() {
	l.newsMu.Lock()
	l.inNews.linkUp, l.outNews.linkUp = true, true
	l.hasIn.Store(true)
	l.hasOut.Store(true)
	l.newsMu.Unlock()
	l.kick()
}

func (l *Layer) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// takeIn applies what the inbox has to hear, and returns the NAKs that
// gives (a link that came back). Hold inMu.
func (l *Layer) takeIn() []reliable.Nak {
	if !l.hasIn.Load() {
		return nil
	}
	l.newsMu.Lock()
	n := l.inNews
	l.inNews = inNews{}
	l.hasIn.Store(false)
	l.newsMu.Unlock()
	for _, k := range n.subs {
		l.in.Subscribe(k)
	}
	for _, p := range n.gone {
		l.in.Forget(p)
	}
	for _, j := range n.judged {
		l.in.Judged(j.id, j.standing)
	}
	if n.linkUp {
		return l.in.LinkUp(l.now()).Naks
	}
	return nil
}

// takeOut applies what the outbox has to hear and answers NAKs; it
// returns the tail markers due now (a link that came back). Hold outMu.
func (l *Layer) takeOut() []reliable.Fence {
	if !l.hasOut.Load() {
		return nil
	}
	l.newsMu.Lock()
	n := l.outNews
	l.outNews = outNews{}
	l.hasOut.Store(false)
	l.newsMu.Unlock()
	for k, seq := range n.acks {
		l.out.Ack(k.from, k.key, seq)
	}
	for _, p := range n.gone {
		l.out.ProcGone(p)
		l.out.Forget(jobenv.ProcKey(p))
		delete(l.procs, p)
	}
	for _, k := range n.naks {
		a := l.out.Nak(k.from, k.key, k.span.Lo, k.span.Hi)
		to := l.cfg.Subjects.Proc(k.from)
		for _, f := range a.Frames {
			h := wire.Header{Kind: wire.KindResend, Target: k.key, ReplyTo: l.cfg.Self, Rank: -1}
			l.sendTransport(to, &h, f)
		}
		for _, r := range a.Missing {
			h := wire.Header{Kind: wire.KindNak, Target: k.key, ReplyTo: l.cfg.Self, Flags: wire.FlagMissing, Rank: -1}
			l.sendTransport(to, &h, wire.AppendSpan(nil, wire.Span{Lo: r.Lo, Hi: r.Hi}))
		}
	}
	if n.linkUp {
		return l.out.LinkUp(l.now())
	}
	return nil
}

// Run sends tail markers, answers NAKs, acknowledges, asks again for what
// is missing and sends runs that wait, until ctx ends.
func (l *Layer) Run(ctx context.Context) {
	t := time.NewTicker(Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
			l.step(time.Time{})
		case now := <-t.C:
			l.clock.Store(now.UnixNano())
			l.step(now)
		}
	}
}

// step acts on what waits; at a tick (now set) it also does what is due
// with time. The outbox goes first: a run waiting to be sent should not
// wait for the dispatcher to finish routing. (Never outMu, then inMu:
// the two are taken one after the other.)
func (l *Layer) step(now time.Time) {
	l.outMu.Lock()
	l.flushRun()
	tails := l.takeOut()
	if !now.IsZero() {
		tails = append(tails, l.out.Tick(now)...)
		l.pool.expire(now)
	}
	l.outMu.Unlock()
	for _, t := range tails {
		h := wire.Header{Kind: wire.KindTail, From: l.cfg.Self, Seq: t.Seq, Rank: -1}
		l.sendTransport(l.cfg.Subjects.Of(t.Key), &h, nil)
	}

	l.inMu.Lock()
	naks := l.takeIn()
	var acks []reliable.Ack
	if !now.IsZero() {
		e := l.in.Tick(now)
		l.effects(e)
		naks = append(naks, e.Naks...)
		acks = l.in.Acks(now)
	}
	if l.in.AcksDue() {
		acks = append(acks, l.in.DueAcks()...)
	}
	naks = append(naks, l.owedNaks...)
	l.owedNaks = nil
	l.unlockIn()
	l.sendNaks(naks)
	l.sendAcks(acks)
}

// unlockIn lets go of the receive lock, once what was routed under it is
// handed on (Config.Flush).
func (l *Layer) unlockIn() {
	if l.cfg.Flush != nil {
		l.cfg.Flush()
	}
	l.inMu.Unlock()
}

// sendTransport publishes one of the layer's own frames (tails, resends,
// NAKs, answers, acknowledgements): not numbered, nothing kept. A frame
// that does not go is asked for again.
func (l *Layer) sendTransport(subject string, h *wire.Header, body []byte) {
	head, err := wire.AppendHeader(nil, h)
	if err != nil {
		return
	}
	l.link.PublishNow(subject, [][]byte{head, body})
}

// sendNaks asks the senders for what is missing.
func (l *Layer) sendNaks(naks []reliable.Nak) {
	for _, k := range naks {
		h := wire.Header{Kind: wire.KindNak, Target: k.Key, ReplyTo: l.cfg.Self, Rank: -1}
		l.sendTransport(l.cfg.Subjects.Proc(k.To), &h, wire.AppendSpan(nil, wire.Span{Lo: k.Lo, Hi: k.Hi}))
	}
}

// sendAcks tells the senders what has come: one frame to each.
func (l *Layer) sendAcks(acks []reliable.Ack) {
	if len(acks) == 0 {
		return
	}
	by := map[string]*wire.Acks{}
	for _, a := range acks {
		b := by[a.To]
		if b == nil {
			b = &wire.Acks{}
			by[a.To] = b
		}
		b.Keys, b.Seqs = append(b.Keys, a.Key), append(b.Seqs, a.Seq)
	}
	for to, b := range by {
		h := wire.Header{Kind: wire.KindAck, ReplyTo: l.cfg.Self, Rank: -1}
		l.sendTransport(l.cfg.Subjects.Proc(to), &h, wire.AppendAcks(nil, b))
	}
}

// Senders is how many senders the layer tracks what it received from.
func (l *Layer) Senders() int {
	l.inMu.Lock()
	defer l.inMu.Unlock()
	return l.in.Senders()
}

// Close sends a run that waits and frees the payloads held for
// receivers: call it before the link closes.
func (l *Layer) Close() {
	l.outMu.Lock()
	l.flushRun()
	l.outMu.Unlock()
	l.pool.close()
}

// notSent tells a frame the link could not take while it was down.
func notSent(err error) bool { return errors.Is(err, bus.ErrNotSent) }
