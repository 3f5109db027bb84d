package actorrt

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// localActors is the proc side of the runtime: the actor meshes (or parts of
// them) this process hosts, by mesh id and by name.
type localActors struct {
	rt *core
	// byID is read on every message without a lock: a map that is never
	// modified, replaced whole (under mu) when a mesh comes or goes.
	byID   atomic.Pointer[map[string]*localMesh]
	mu     sync.Mutex
	meshes map[string]*localMesh
	names  map[string]*localMesh

	// staged lists the actors that route gave messages in the batch being
	// routed; flush queues them. Touched under the delivery layer's
	// receive lock only.
	staged []*actor
}

// flush queues what route staged in this batch: one lock per actor per
// batch (a run of a thousand messages to one actor takes it once). The
// delivery layer calls it after each batch (delivery.Config.Flush).
func (la *localActors) flush() {
	for i, a := range la.staged {
		a.flushStaged()
		la.staged[i] = nil
	}
	la.staged = la.staged[:0]
}

// publish makes the current meshes visible to deliver. Hold mu.
func (la *localActors) publish() {
	m := make(map[string]*localMesh, len(la.meshes))
	for id, lm := range la.meshes {
		m[id] = lm
	}
	la.byID.Store(&m)
}

// localMesh is the part of an actor mesh that lives in this proc: usually
// one member, several with SpawnPerProc.
type localMesh struct {
	rt      *core
	id      string
	name    string
	typ     *actorType
	base    Extent
	whole   *region
	sub     subscription
	owner   string // the owner's proc
	stopped atomic.Bool

	// members is the actor of each member hosted here. A restart in place
	// replaces one: the slice is replaced whole, under mu, so that deliver
	// reads it without a lock.
	members  atomic.Pointer[[]*actor]
	mu       sync.Mutex
	args     []byte // Init's arguments, as spawned: a restart's Init gets them again
	restarts bool   // the mesh has a restart policy: a failed member's stand-in waits for its restart

	// The proc and agent of every member, by base rank: not in the spawn
	// request (each proc gets only its own members), fetched from the
	// owner the first time MyMesh needs them.
	infoMu sync.Mutex
	info   *meshInfo

	// stats are the endpoint stats of its members here, by base rank
	// (feedcount.go): made at spawn, never changed; nil with the feed off.
	stats map[int][]endpointStats
}

// meshInfoReq asks a mesh's owner where its members are; with Settled,
// once no member's restart on a new proc is pending (moves.go).
type meshInfoReq struct {
	Mesh    string `msgpack:"mesh"`
	Settled bool   `msgpack:"settled,omitempty"`
}

// meshInfo is where a mesh's members are: the proc and host agent of
// each, by base rank, as spawned, and the members that moved since.
type meshInfo struct {
	Procs  []string    `msgpack:"procs"`
	Agents []string    `msgpack:"agents"`
	Moved  []movedWire `msgpack:"moved,omitempty"`
	// Missing: the members the mesh goes on without (GoOnWithout).
	Missing []missingWire `msgpack:"missing,omitempty"`
}

func newLocalActors(rt *core) *localActors {
	return &localActors{rt: rt, meshes: map[string]*localMesh{}, names: map[string]*localMesh{}}
}

// The bodies of the actor ops. The ops, and the bodies of the host
// agent's, are wire's.

// spawnReq (wire.OpSpawn) creates members of a mesh on the receiving proc.
type spawnReq struct {
	Mesh  string             `msgpack:"mesh"`
	Name  string             `msgpack:"name"`
	Type  string             `msgpack:"type"`
	Dims  Dims               `msgpack:"dims"`  // the mesh's base extent
	Ranks []int              `msgpack:"ranks"` // the base ranks hosted here
	Args  msgpack.RawMessage `msgpack:"args"`  // Init's arguments, as an array
	Owner string             `msgpack:"owner"` // the proc that owns the mesh: failures go there
	// Restart: the mesh has a restart policy (the owner keeps it), so a
	// member that fails waits for its restart instead of answering every
	// later call with its failure.
	Restart bool `msgpack:"restart,omitempty"`
	// Moved: the members restart here, a new proc, after theirs ended:
	// they are reached on this proc's subject, not the mesh's.
	Moved bool `msgpack:"moved,omitempty"`
}

// stopReq (wire.OpStop) stops the receiving proc's members of a mesh.
type stopReq struct {
	Mesh string `msgpack:"mesh"`
}

// deliver hands a mesh message to each local member in its region.
func (la *localActors) deliver(f wire.Frame, subject string) { la.deliverOr(f, subject, nil) }

// deliverOr is deliver, or, with fail set (the message's payload could
// not be read), the answer fail to each member's caller that waits.
func (la *localActors) deliverOr(f wire.Frame, subject string, fail error) {
	var lm *localMesh
	if m := la.byID.Load(); m != nil {
		lm = (*m)[f.Target]
	}
	if lm == nil {
		la.rt.drop(wire.DropIDs, subject, fmt.Errorf("a call to mesh %.40q, not hosted here", f.Target))
		return
	}
	if f.Port != 0 && !wire.ValidID(f.ReplyTo) {
		la.rt.drop(wire.DropIDs, subject, fmt.Errorf("a call to mesh %s with reply port %.40q#%d", lm.name, f.ReplyTo, f.Port))
		return
	}
	view := lm.whole
	if f.Region != nil {
		r, err := wireRegion(f.Region).toRegion(lm.base)
		if err != nil {
			la.rt.drop(wire.DropRegion, subject, fmt.Errorf("mesh %s: %w", lm.name, err))
			return
		}
		view = &r
	}
	if f.Port != 0 {
		la.rt.health.portNamedOpen(f.ReplyTo, f.Port)
	}
	stopped := lm.stopped.Load()
	members := lm.current()
	for _, a := range members {
		idx, ok := a.baseRank, true
		if view != lm.whole {
			idx, ok = view.messageRank(a.baseRank)
		}
		if !ok {
			continue
		}
		refused := fail
		switch {
		case refused != nil:
		case stopped:
			refused = fmt.Errorf("%w: mesh %s was stopped", ErrStopped, lm.name)
		default:
			refused = a.deadErr()
			if refused != nil && f.Port == 0 && a.next != nil {
				// A one-way message to a member that failed and restarts:
				// its stand-in takes it (flushStaged).
				refused = nil
			}
		}
		if refused != nil {
			if f.Port != 0 {
				la.rt.sendErrorToPort(portRef{proc: f.ReplyTo, id: f.Port, rank: idx}, refused)
			}
			continue
		}
		e := envelope{method: f.Method, payload: f.Payload, sole: len(members) == 1, view: view, msgIdx: idx}
		if f.Port != 0 {
			e.reply = portRef{proc: f.ReplyTo, id: f.Port, rank: idx}
			if f.Rank >= 0 {
				e.reply.rank = f.Rank // the sender chose the rank (remote functions)
			}
		}
		first, err := a.box.stage(e)
		if first {
			la.staged = append(la.staged, a)
		}
		if err != nil {
			if f.Port != 0 {
				la.rt.sendErrorToPort(e.reply, err)
			} else {
				// Nobody waits for it, so nobody would know it was lost:
				// the actor fails, and its owner hears why.
				a.fail(err.Error(), nil)
			}
		}
	}
}

func (la *localActors) spawn(req *spawnReq, reply portRef) error {
	rt := la.rt
	at, err := lookupTypeName(req.Type)
	if err != nil {
		return err
	}
	base, err := NewExtent(req.Dims)
	if err != nil {
		return err
	}
	la.mu.Lock()
	defer la.mu.Unlock()
	if old := la.names[req.Name]; old != nil {
		return fmt.Errorf("%w: %q is a live mesh on proc %s", ErrNameTaken, req.Name, rt.procID)
	}
	if la.meshes[req.Mesh] != nil {
		return fmt.Errorf("%w: mesh id %s spawned twice on proc %s", ErrNameTaken, req.Mesh, rt.procID)
	}
	whole := wholeRegion(base)
	lm := &localMesh{rt: rt, id: req.Mesh, name: req.Name, typ: at, base: base, whole: &whole, owner: req.Owner, args: req.Args, restarts: req.Restart}
	for _, r := range req.Ranks {
		if r < 0 || r >= base.NumRanks() {
			return fmt.Errorf("%w: rank %d of %v", ErrOutOfRange, r, base)
		}
	}
	// Subscribe before the first Init reply goes out: the spawner sends
	// calls only after every reply, and the server has the SUB by then.
	// Members moved here after their proc ended are reached on this
	// proc's subject only (moves.go).
	if !req.Moved {
		rt.delivery.Subscribe(jobenv.MeshKey(req.Mesh)) // before the SUB: what comes on it counts
		if lm.sub, err = rt.link.Subscribe(rt.subjects.Mesh(req.Mesh)); err != nil {
			return err
		}
	}
	lm.newStats(req.Ranks)
	members := make([]*actor, 0, len(req.Ranks))
	for _, r := range req.Ranks {
		members = append(members, newActor(lm, r))
	}
	lm.members.Store(&members)
	for _, a := range members {
		r := a.baseRank
		reply.rank = r
		a.enqueue(envelope{init: true, payload: req.Args, reply: reply, msgIdx: r})
		go a.run()
	}
	la.meshes[lm.id] = lm
	la.names[lm.name] = lm
	la.publish()
	return nil
}

// stopMesh stops this proc's members of a mesh; their queued calls fail
// with ErrStopped. Their cleanups run after, without holding up the caller.
//
// The mesh stays subscribed as a tombstone: a later call to it, from any
// holder of a reference, is answered with ErrStopped instead of vanishing.
func (la *localActors) stopMesh(id string) { la.stopMeshFor(id, nil) }

// stopMeshFor is stopMesh, with cause what the members' Cleanup gets (nil:
// the mesh was stopped).
func (la *localActors) stopMeshFor(id string, cause error) {
	la.mu.Lock()
	lm := la.meshes[id]
	if lm != nil && la.names[lm.name] == lm {
		delete(la.names, lm.name) // the name may be spawned again
	}
	la.mu.Unlock()
	if lm == nil || lm.stopped.Swap(true) {
		return
	}
	if cause == nil {
		cause = fmt.Errorf("%w: mesh %s was stopped", ErrStopped, lm.name)
	}
	for _, a := range lm.current() {
		a.stop(cause)
	}
}

// stopAll stops every actor hosted here, the process ending (cause is
// why), and returns once their cleanups are over: they run at once, all
// within one cleanup timeout.
func (la *localActors) stopAll(cause error) {
	la.mu.Lock()
	ids := make([]string, 0, len(la.meshes))
	var all []*actor
	for id, lm := range la.meshes {
		ids = append(ids, id)
		all = append(all, lm.current()...)
	}
	la.mu.Unlock()
	for _, id := range ids {
		la.stopMeshFor(id, cause)
	}
	expired := make(chan struct{})
	t := time.AfterFunc(la.rt.opts.cleanupTimeout, func() { close(expired) })
	defer t.Stop()
	for _, a := range all {
		a.awaitCleanup(expired)
	}
}

// failMesh fails this proc's members of mesh id (the reason is why).
func (la *localActors) failMesh(id, reason string) {
	la.mu.Lock()
	lm := la.meshes[id]
	la.mu.Unlock()
	if lm == nil {
		return
	}
	for _, a := range lm.current() {
		a.fail(reason, nil)
	}
}

// failAll fails every actor hosted here (the system actor included): a
// message for any of them may be lost (see core.lost), and their owners
// hear why.
func (la *localActors) failAll(reason string) {
	la.mu.Lock()
	var all []*actor
	for _, lm := range la.meshes {
		all = append(all, lm.current()...)
	}
	la.mu.Unlock()
	for _, a := range all {
		a.fail(reason, nil)
	}
}

// current is the actor of each member hosted here.
func (lm *localMesh) current() []*actor {
	if p := lm.members.Load(); p != nil {
		return *p
	}
	return nil
}

// replace puts next in old's place. Hold lm.mu.
func (lm *localMesh) replace(old, next *actor) {
	cur := lm.current()
	members := make([]*actor, len(cur))
	for i, a := range cur {
		if a == old {
			a = next
		}
		members[i] = a
	}
	lm.members.Store(&members)
}

// standIn marks a, a member of a mesh with a restart policy, dead with
// *err (its failure's reason: reason) and puts in its place a new instance that holds the messages sent
// to the member until its owner restarts it or gives up on it (restart).
// The stand-in takes the place first: a message routed after is the
// stand-in's, one routed before is in a's mailbox (or routed to it by a
// dispatcher that read the old members), which a hands over as it
// leaves. It reports whether it marked a dead (false: a had ended).
func (lm *localMesh) standIn(a *actor, err *error, reason string) bool {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if a.deadErr() != nil {
		return false
	}
	if lm.stopped.Load() || !slices.Contains(lm.current(), a) {
		return a.dead.CompareAndSwap(nil, err)
	}
	next := newActor(lm, a.baseRank)
	next.hold = make(chan restartOrder, 1)
	next.standsFor = reason
	next.prev, a.next = a, next
	lm.replace(a, next)
	if !a.dead.CompareAndSwap(nil, err) {
		// Stopped meanwhile: the stand-in ends with it.
		next.order(restartOrder{giveUp: a.deadErr()})
		go next.run()
		return false
	}
	go next.run()
	return true
}

// restart carries out a restart request of the mesh's owner for this
// proc's members: each member's stand-in starts (or, to give up, fails),
// a member that failed with no stand-in gets a new instance, and a live
// one (restarted with its group) is replaced. Each new instance answers
// on reply, with its base rank, once its Init returned.
func (la *localActors) restart(req *restartReq, reply portRef) {
	answer := func(b int, err error) {
		if reply.id != 0 {
			r := reply
			r.rank = b
			if err != nil {
				la.rt.sendErrorToPort(r, err)
			} else {
				la.rt.sendToPort(r, 0, func(enc *msgpack.Encoder) error { return enc.EncodeNil() })
			}
		}
	}
	la.mu.Lock()
	lm := la.meshes[req.Mesh]
	la.mu.Unlock()
	if lm == nil || isSystemMesh(lm.id) {
		for _, b := range req.Ranks {
			answer(b, fmt.Errorf("%w: mesh %.40q has no members on proc %s", ErrStopped, req.Mesh, la.rt.procID))
		}
		return
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for _, b := range req.Ranks {
		var a *actor
		for _, m := range lm.current() {
			if m.baseRank == b {
				a = m
			}
		}
		switch {
		case a == nil:
			answer(b, fmt.Errorf("%w: %s[%d] is not on proc %s", ErrOutOfRange, lm.name, b, la.rt.procID))
			continue
		case lm.stopped.Load():
			answer(b, fmt.Errorf("%w: mesh %s was stopped", ErrStopped, lm.name))
			continue
		}
		init := envelope{init: true, restart: true, manual: req.Manual, payload: lm.args, msgIdx: b}
		if reply.id != 0 {
			init.reply = reply
			init.reply.rank = b
		}
		held := a.held()
		switch {
		case req.GiveUp != "":
			err := fmt.Errorf("%w: actor %s: %s", ErrActorFailed, a.id, req.GiveUp)
			if req.Missing {
				err = fmt.Errorf("%w: %w", ErrMissing, err)
			}
			if held {
				a.order(restartOrder{giveUp: err})
			} else if req.Missing && a.deadErr() != nil {
				a.dead.Store(&err) // failed with no stand-in: it answers as missing from now on
			}
			continue
		case held:
			a.order(restartOrder{init: init})
			continue
		// A stand-in told to fail has failed, though it may not have
		// ended yet: by hand, a new instance replaces it (and waits for
		// its end).
		case a.deadErr() == nil && !a.givenUp && req.Manual:
			answer(b, fmt.Errorf("%w: actor %s is running", ErrNotFailed, a.id))
			continue
		}
		// A new instance; its Init waits for the old one's end (and
		// Cleanup). A live member of the failed one's group ends as a
		// failed one does, without a report (its owner restarts it), and
		// hands its one-way messages over.
		next := newActor(lm, b)
		next.hold = make(chan restartOrder, 1)
		next.prev = a
		if a.deadErr() == nil {
			a.next = next
			a.stopAs(fmt.Errorf("%w: actor %s was restarted with its group: %s", ErrActorFailed, a.id, req.Cause), nil)
		}
		lm.replace(a, next)
		next.order(restartOrder{init: init})
		go next.run()
	}
}
