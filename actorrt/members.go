package actorrt

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/delivery"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// members answers the delivery layer's question: is a sender a member of
// the job? Only a member's word that it no longer holds messages makes
// them lost, and strangers are the first forgotten when the sender table
// is full (delivery.Config's Standing and Ask), so that a buggy peer
// holding the job's token, under a made-up id, can neither fail actors
// nor fill the table.
//
// A process knows as members the client, itself, the procs its own agent
// runs and those it heard of and has not heard are gone (the health
// table's: those it started through other agents, those of every proc
// mesh and actor mesh that reached it). Host agents send no numbered
// frames: as senders they are strangers. Anyone else it asks about, once
// a message of it is delivered, those who can vouch for it: a proc's id
// names them (newProcID). Id P-N was started by proc P (through its own
// agent, or one whose id is no host key); id K.L-N by the agent K of its
// host key, for a proc of local id L; an agent hN by the client's
// launcher, which the client heard of. Each voucher is asked (OpEnded)
// which of the ids it knows (wire.EndedReply's Unknown), and its word
// counts only if it is a member itself, found out the same way first: a
// chain that ends at the client, or at a proc or agent this process
// knows. One voucher's yes makes a member; an end one reports, or no yes
// from any within the host timeout, a stranger.
type members struct {
	rt      *core
	timeout time.Duration

	mu      sync.Mutex
	verdict map[string]bool      // what vouchers said: true for a member (bounded: maxVerdicts)
	pending map[string]*vouching // ids being found out (bounded: maxVouching)
}

const (
	// maxVerdicts bounds the verdicts kept; past it they are forgotten
	// (asked again if needed).
	maxVerdicts = 1 << 14
	// maxVouching bounds the ids being found out at once; past it, an id
	// is a stranger at once. The delivery layer asks about at most
	// reliable.DefaultInLimits.Strangers senders at once.
	maxVouching = 1 << 12
	// maxVouchIDs bounds the ids one question names.
	maxVouchIDs = 1 << 10
)

// vouching is what is being found out about one id.
type vouching struct {
	left   int      // vouchers yet to answer, or to be found out themselves
	then   []string // ids to ask this one about once it is found a member
	silent bool     // a voucher did not answer: a stranger verdict is not kept
}

// question is one id to ask a voucher about.
type question struct{ to, about string }

func newMembers(rt *core, timeout time.Duration) *members {
	return &members{rt: rt, timeout: timeout, verdict: map[string]bool{}, pending: map[string]*vouching{}}
}

// standing is what this process knows of sender id now, without asking
// (delivery.Config.Standing).
func (m *members) standing(id string) delivery.Standing {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.standingLocked(id)
}

// standingLocked is standing, holding mu (then the health table's and
// the agent's locks are taken: never the other way).
func (m *members) standingLocked(id string) delivery.Standing {
	rt := m.rt
	switch {
	case id == jobenv.ClientID || id == rt.procID:
		return delivery.Member
	case jobenv.IsAgentID(id):
		return delivery.Stranger
	}
	if heard, gone := rt.health.knows(id); gone {
		return delivery.Stranger
	} else if heard {
		return delivery.Member
	}
	if rt.agent != nil && rt.agent.Runs(id) {
		return delivery.Member
	}
	if st := m.verdictOf(id); st != delivery.Unknown || len(vouchers(id)) > 0 {
		return st
	}
	return delivery.Stranger // an id no proc of the job is given
}

// verdictOf is what vouchers said of id, if anything. Hold mu.
func (m *members) verdictOf(id string) delivery.Standing {
	member, ok := m.verdict[id]
	switch {
	case !ok:
		return delivery.Unknown
	case member:
		return delivery.Member
	}
	return delivery.Stranger
}

// knows reports whether this process knows id to be in the job: what it
// vouches for when asked (hostagent.Config.Knows).
func (m *members) knows(id string) bool {
	return !jobenv.IsAgentID(id) && m.standing(id) == delivery.Member
}

// voucherStanding is what this process knows of a voucher: an agent is a
// member if this process heard of it and it is not gone. Hold mu.
func (m *members) voucherStanding(v string) delivery.Standing {
	switch {
	case v == m.rt.procID:
		return delivery.Stranger // it knows no more than standing said
	case !jobenv.IsAgentID(v):
		return m.standingLocked(v)
	}
	switch heard, gone := m.rt.health.knows(v); {
	case gone:
		return delivery.Stranger
	case heard:
		return delivery.Member
	}
	return m.verdictOf(v)
}

// vouchers are who can say whether id is in the job (see members).
func vouchers(id string) []string {
	if jobenv.IsAgentID(id) {
		return []string{jobenv.ClientID}
	}
	var out []string
	if i := strings.LastIndexByte(id, '-'); i > 0 && isNumber(id[i+1:]) {
		if p := id[:i]; p == jobenv.ClientID || isProcID(p) {
			out = append(out, p)
		}
	}
	if k := jobenv.HostKey(id); k != "" && jobenv.ValidHostKey(k) && (jobenv.IsAgentID(k) || isProcID(k)) && !(len(out) > 0 && out[0] == k) {
		out = append(out, k)
	}
	return out
}

// isProcID: p could be the id of a proc that starts others: the client,
// or an id ending in -N.
func isProcID(p string) bool {
	if p == jobenv.ClientID {
		return true
	}
	i := strings.LastIndexByte(p, '-')
	return i > 0 && isNumber(p[i+1:])
}

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// ask finds out whether sender id is in the job, and tells the delivery
// layer (delivery.Config.Ask). It does not wait.
func (m *members) ask(id string) {
	var judged []judgement
	var qs []question
	m.mu.Lock()
	if st := m.standingLocked(id); st != delivery.Unknown {
		judged = append(judged, judgement{id, st}) // heard of since
	} else {
		qs = m.start(id, nil, &judged)
	}
	m.mu.Unlock()
	m.finish(qs, judged, nil)
}

// judgement is a verdict to pass on, once the lock is let go.
type judgement struct {
	id       string
	standing delivery.Standing
}

// start begins finding out about id, unless that is under way: it
// returns qs with the questions to send. Hold mu.
func (m *members) start(id string, qs []question, judged *[]judgement) []question {
	if m.pending[id] != nil {
		return qs
	}
	if len(m.pending) >= maxVouching {
		*judged = append(*judged, judgement{id, delivery.Stranger})
		return qs
	}
	p := &vouching{}
	m.pending[id] = p
	for _, v := range vouchers(id) {
		switch m.voucherStanding(v) {
		case delivery.Member:
			p.left++
			qs = append(qs, question{v, id})
		case delivery.Unknown:
			qs = m.start(v, qs, judged)
			if w := m.pending[v]; w != nil {
				p.left++
				w.then = append(w.then, id)
			} else if m.verdict[v] {
				p.left++
				qs = append(qs, question{v, id})
			}
		}
	}
	if p.left == 0 {
		qs = m.judge(id, false, qs, judged)
	}
	return qs
}

// judge settles id: a member or not. It asks a new member about the ids
// that waited for it, and counts a stranger out of their vouchers.
// Hold mu.
func (m *members) judge(id string, member bool, qs []question, judged *[]judgement) []question {
	p := m.pending[id]
	delete(m.pending, id)
	if p == nil || member || !p.silent {
		if len(m.verdict) >= maxVerdicts {
			clear(m.verdict)
		}
		m.verdict[id] = member
	}
	st := delivery.Stranger
	if member {
		st = delivery.Member
	}
	*judged = append(*judged, judgement{id, st})
	if p == nil {
		return qs
	}
	for _, w := range p.then {
		if member {
			qs = append(qs, question{id, w})
			continue
		}
		if q := m.pending[w]; q != nil {
			q.silent = q.silent || p.silent
			if q.left--; q.left == 0 {
				qs = m.judge(w, false, qs, judged)
			}
		}
	}
	return qs
}

// answered takes voucher to's answer about ids (ok false: none came, or
// it could not be read).
func (m *members) answered(to string, ids []string, r wire.EndedReply, ok bool) {
	unknown := map[string]bool{}
	for _, id := range r.Unknown {
		unknown[id] = true
	}
	gone := map[string]wire.GoneNotice{}
	for _, n := range r.Gone {
		gone[n.Proc] = n
	}
	var judged []judgement
	var ended []wire.GoneNotice
	var qs []question
	m.mu.Lock()
	for _, id := range ids {
		p := m.pending[id]
		if p == nil {
			continue
		}
		n, isGone := gone[id]
		switch {
		case ok && isGone:
			ended = append(ended, n)
			qs = m.judge(id, false, qs, &judged)
		case ok && !unknown[id]:
			qs = m.judge(id, true, qs, &judged)
		default:
			p.silent = p.silent || !ok
			if p.left--; p.left == 0 {
				qs = m.judge(id, false, qs, &judged)
			}
		}
	}
	m.mu.Unlock()
	m.finish(qs, judged, ended)
}

// finish sends the questions, one a voucher (at most maxVouchIDs ids
// each), and passes on what was
// found out.
func (m *members) finish(qs []question, judged []judgement, ended []wire.GoneNotice) {
	for _, n := range ended {
		m.rt.health.gone(n, false)
	}
	for _, j := range judged {
		m.rt.delivery.Judged(j.id, j.standing)
	}
	slices.SortStableFunc(qs, func(a, b question) int { return strings.Compare(a.to, b.to) })
	for len(qs) > 0 {
		n := 1
		for n < len(qs) && n < maxVouchIDs && qs[n].to == qs[0].to {
			n++
		}
		ids := make([]string, n)
		for i, q := range qs[:n] {
			ids[i] = q.about
		}
		m.send(qs[0].to, ids)
		qs = qs[n:]
	}
}

// send asks voucher to which of ids it knows, not numbered (a made-up
// voucher costs the sender no state), and waits for the answer on a port
// for the timeout at most.
func (m *members) send(to string, ids []string) {
	p := &vouchPort{m: m, to: to, ids: ids}
	id, err := m.rt.ports.open(p, []string{to})
	if err != nil {
		p.fail(err) // shutting down
		return
	}
	p.port = id
	if err := m.rt.sendControlOn(m.rt.subjects.Proc(to), wire.OpEnded, id, &wire.EndedReq{IDs: ids}); err != nil {
		m.rt.ports.close(id)
		p.fail(err)
		return
	}
	time.AfterFunc(m.timeout, func() {
		m.rt.ports.close(id)
		p.fail(nil)
	})
}

// vouchPort takes a voucher's answer.
type vouchPort struct {
	m    *members
	to   string
	ids  []string
	port uint64
	once sync.Once
}

func (p *vouchPort) deliver(rt *core, f *wire.Frame) bool {
	if f.ReplyTo != p.to {
		return true // not the voucher's: its answer may still come
	}
	var r wire.EndedReply
	ok := f.Flags&wire.FlagError == 0 && decodeBody(f, &r) == nil
	p.once.Do(func() { p.m.answered(p.to, p.ids, r, ok) })
	return false
}

func (p *vouchPort) fail(error) {
	p.once.Do(func() { p.m.answered(p.to, p.ids, wire.EndedReply{}, false) })
}
