package hostagent

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// sparePool is the spares an agent keeps for one SpawnProcs of a mesh
// (SpawnProcsReq.Spares): procs of the mesh's program and arguments,
// started idle (their runtime up and dialled in, no rank), one of which
// takes the slot of a proc of the mesh that ended when it is respawned
// here. Its fields are under Agent.mu.
type sparePool struct {
	want int
	boot *bootstrap // a spare's: the mesh's program and base environment, no rank
	idle map[string]*proc
	// starting counts the spares being started; failed, those in a row
	// that ended before they were up (at maxSpareFailures, the pool
	// starts no more).
	starting, failed int
	closed           bool // its mesh is gone from this host: no more spares
}

// maxSpareFailures bounds the spares in a row a pool starts that end
// before they are up: a program that cannot start is not started forever.
const maxSpareFailures = 3

// handoff is a slot handed to a spare (OpTakeSlot), until the spare says
// it has taken it (OpSlotTaken).
type handoff struct {
	old string  // the ended proc whose slot it takes
	to  readyTo // where it reports ready
}

// spareSeq numbers the spares of every agent of this process.
var spareSeq atomic.Uint64

// newPool makes the pool of req's mesh, when it asks for spares and
// they can be kept: SDK procs executed here (a Starter's start in
// microseconds; a command or wrapped proc cannot take its rank late).
func (a *Agent) newPool(req wire.SpawnProcsReq, exe string, args []string, prog *bincache.Program, base []string) *sparePool {
	if req.Spares <= 0 || req.Command != nil || req.Wrap != nil || a.cfg.Starter != nil {
		return nil
	}
	pool := &sparePool{want: min(req.Spares, wire.MaxSpares), idle: map[string]*proc{}}
	pool.boot = &bootstrap{argv: append([]string{exe}, args...), prog: prog, base: base, mesh: req.Mesh, rank: -1, pool: pool}
	if req.Mesh != "" {
		a.mu.Lock()
		a.pools[req.Mesh] = pool
		a.mu.Unlock()
	}
	return pool
}

// spareID names a new spare: under the agent's host key, as the procs
// other runtimes ask it for, with a local part no runtime makes (those
// are c-1, c-1-2, ...).
func (a *Agent) spareID() string {
	n := strconv.FormatUint(spareSeq.Add(1), 10)
	if jobenv.ValidHostKey(a.cfg.ID) {
		return a.cfg.ID + ".s-" + n
	}
	return a.cfg.ID + "-s" + n
}

// fill starts the spares pool lacks, and returns once they are started
// (not up).
func (a *Agent) fill(pool *sparePool) {
	for {
		a.mu.Lock()
		if pool.closed || a.closing.Load() || pool.failed >= maxSpareFailures || len(pool.idle)+pool.starting >= pool.want {
			a.mu.Unlock()
			return
		}
		pool.starting++
		a.mu.Unlock()
		sp, err := a.launch(a.spareID(), pool.boot, nil)
		a.mu.Lock()
		pool.starting--
		if err != nil {
			pool.failed++
		}
		late := sp != nil && pool.closed // its mesh was stopped meanwhile
		if late {
			sp.stopping = true
		}
		a.mu.Unlock()
		if err != nil {
			a.cfg.Log.Warn().Err(err).Str("mesh", pool.boot.mesh).Msg("cannot start a spare")
		}
		if late {
			a.stop([]*proc{sp}, a.cfg.StopTimeout)
		}
	}
}

// spareEnded takes idle spare p, which ended, out of its pool. Under a.mu.
func (a *Agent) spareEnded(p *proc) {
	pool := p.boot.pool
	delete(pool.idle, p.id)
	if p.lastAlive.Load() == 0 && !p.stopping {
		pool.failed++
		if pool.failed == maxSpareFailures {
			a.cfg.Log.Warn().Str("mesh", pool.boot.mesh).Msgf("%d spares in a row ended before they were up: no more are started", maxSpareFailures)
		}
	}
}

// takeSpare takes an idle spare of b's pool, if there is one (one up,
// its runtime beating, before one still starting, which is nearer ready
// than a proc started now), for the slot b is the bootstrap of: it is
// that slot's proc from now on, being handed it. Under a.mu.
func (a *Agent) takeSpare(b *bootstrap, req wire.RespawnProcReq) *proc {
	if b.pool == nil {
		return nil
	}
	var sp *proc
	for _, p := range b.pool.idle {
		if p.process.Exited() {
			continue
		}
		if sp == nil || p.lastAlive.Load() != 0 {
			sp = p
		}
		if p.lastAlive.Load() != 0 {
			break
		}
	}
	if sp == nil {
		return nil
	}
	delete(b.pool.idle, sp.id)
	sp.spare, sp.boot = false, b
	sp.hand = &handoff{old: req.Old, to: readyTo{req.Proc, req.Port, 0}}
	sp.label.Store(ptr(labelOf(b, &sp.hand.to)))
	return sp
}

// handSlot hands spare sp the slot whose bootstrap is b (takeSpare took
// it), once it is up: it binds sp to the slot's CPUs and sends it the
// slot's variables and where to report ready, then refills the pool. A
// spare that cannot be handed the slot is killed, and the slot is the
// ended proc's again (as when the spare ends before it is ready: watch).
func (a *Agent) handSlot(sp *proc, b *bootstrap) {
	a.mu.Lock()
	hand := sp.hand
	a.mu.Unlock()
	var err error
	wait := time.NewTimer(successorWait)
	select {
	case <-sp.up:
		err = a.sendSlot(sp, b, hand)
	case <-sp.process.Done():
		// watch gives the slot back and tells the asker.
	case <-wait.C:
		err = fmt.Errorf("it did not start its runtime within %v", successorWait)
	}
	wait.Stop()
	if err != nil {
		a.mu.Lock()
		mine := a.unhand(sp, hand)
		a.mu.Unlock()
		sp.process.Kill()
		if mine {
			a.replyError(hand.to.proc, hand.to.port, hand.to.rank, fmt.Errorf("%w: respawn proc %s on %s: hand its slot to spare %s: %v",
				wire.ErrProcFailed, hand.old, a.cfg.Host, sp.id, err))
		}
	}
	a.fill(b.pool)
}

func (a *Agent) sendSlot(sp *proc, b *bootstrap, hand *handoff) error {
	if len(b.cpus) > 0 {
		if err := child.Bind(sp.process.Pid(), b.cpus); err != nil {
			return err
		}
	}
	req := wire.TakeSlotReq{Env: b.extra, Proc: hand.to.proc, Port: hand.to.port}
	h := wire.Header{Kind: wire.KindControl, Method: wire.OpTakeSlot, ReplyTo: a.cfg.ID, Rank: -1}
	return a.publishFrame(a.subjects.Proc(sp.id), &h, func(e *msgpack.Encoder) error { return e.Encode(&req) })
}

// unhand gives the slot handed to p, which did not take it, back to the
// proc it was to replace, which may be respawned again; it reports
// whether it did (once: the caller then tells the asker). Under a.mu.
func (a *Agent) unhand(p *proc, hand *handoff) bool {
	if p.hand != hand {
		return false
	}
	p.hand = nil
	if r := a.respawnable[hand.old]; r != nil && r.successor == p.id {
		r.boot, r.successor = p.boot, ""
	}
	return true
}

// SlotTaken records that spare id has taken the slot it was handed: its
// variables are set, and a second asker for the slot may be sent to it.
func (a *Agent) SlotTaken(id string) {
	a.mu.Lock()
	if p := a.children[id]; p != nil {
		p.hand = nil
	}
	a.mu.Unlock()
}

// handing reports whether p is a spare handed a slot it has not taken
// yet.
func (a *Agent) handing(p *proc) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return p.hand != nil
}

// stopSpares stops the spares of the pools of ps, which were stopped,
// whose meshes have no proc left on this host: a mesh's spares live as
// long as it does.
func (a *Agent) stopSpares(ps []*proc, grace time.Duration) {
	var spares []*proc
	a.mu.Lock()
	for _, p := range ps {
		if p.boot == nil {
			continue
		}
		pool := p.boot.pool
		if pool == nil || pool.closed || a.poolInUse(pool) {
			continue
		}
		pool.closed = true
		if a.pools[pool.boot.mesh] == pool {
			delete(a.pools, pool.boot.mesh)
		}
		for _, sp := range pool.idle {
			sp.stopping = true
			spares = append(spares, sp)
		}
	}
	a.mu.Unlock()
	a.stop(spares, grace)
}

// poolInUse reports whether a proc of pool's mesh, not a spare, still
// runs here. Under a.mu.
func (a *Agent) poolInUse(pool *sparePool) bool {
	for _, c := range a.children {
		if c.boot != nil && c.boot.pool == pool && !c.spare && !c.process.Exited() {
			return true
		}
	}
	return false
}

// labelOf is what the lines of a proc started as b says carry: its
// mesh and rank, or, for a spare (no to), its mesh's name marked so.
func labelOf(b *bootstrap, to *readyTo) lineLabel {
	if to == nil && b.pool != nil {
		return lineLabel{mesh: b.mesh + " spare", rank: 0}
	}
	return lineLabel{mesh: b.mesh, rank: b.rank}
}

func ptr[T any](v T) *T { return &v }

// IdleSpares counts the agent's spares that are up (beating) and wait
// for a slot, over all its pools.
func (a *Agent) IdleSpares() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, p := range a.children {
		if p.spare && p.lastAlive.Load() != 0 {
			n++
		}
	}
	return n
}

// adopt hands the slot req.Adopt describes, of a proc of another host
// that was lost, to an idle spare of its mesh here: that spare is the
// slot's proc from now on, here, with the slot's variables and CPU
// binding, and is respawned here, from a spare or not, when it ends in
// turn. Without an idle spare of the mesh, it is refused on the port.
func (a *Agent) adopt(req wire.RespawnProcReq) {
	ad := req.Adopt
	env, err := a.gpus(ad.Env)
	if err != nil {
		a.replyError(req.Proc, req.Port, 0, fmt.Errorf("%w: adopt the slot of proc %s on %s: %v", wire.ErrProcFailed, req.Old, a.cfg.Host, err))
		return
	}
	var sp *proc
	var b *bootstrap
	a.mu.Lock()
	if pool := a.pools[ad.Mesh]; pool != nil && !pool.closed && !a.closing.Load() {
		nb := *pool.boot
		nb.extra, nb.cpus, nb.rank = env, ad.CPUs, ad.Rank
		b = &nb
		sp = a.takeSpare(b, req)
	}
	a.mu.Unlock()
	if sp == nil {
		a.replyError(req.Proc, req.Port, 0, fmt.Errorf("%w: adopt the slot of proc %s (rank %d of mesh %s) on %s: no spare of the mesh idle here",
			wire.ErrProcFailed, req.Old, ad.Rank, ad.Mesh, a.cfg.Host))
		return
	}
	a.handSlot(sp, b)
}
