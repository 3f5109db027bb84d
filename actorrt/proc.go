package actorrt

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// procState is the proc side of the runtime: the actor meshes (or parts of
// them) this process hosts, by mesh id and by name.
type procState struct {
	rt *runtimeT
	// byID is read on every message without a lock: a map that is never
	// modified, replaced whole (under mu) when a mesh comes or goes.
	byID   atomic.Pointer[map[string]*localMesh]
	mu     sync.Mutex
	meshes map[string]*localMesh
	names  map[string]*localMesh
}

// publish makes the current meshes visible to deliver. Hold mu.
func (ps *procState) publish() {
	m := make(map[string]*localMesh, len(ps.meshes))
	for id, lm := range ps.meshes {
		m[id] = lm
	}
	ps.byID.Store(&m)
}

// localMesh is the part of an actor mesh that lives in this proc: usually
// one member, several with SpawnPerProc.
type localMesh struct {
	rt      *runtimeT
	id      string
	name    string
	typ     *actorType
	base    Extent
	whole   *region
	members []*actor
	sub     *bus.Subscription
	procs   []string // the proc of every member, by base rank
	owner   string   // the owner's proc
	stopped atomic.Bool
}

func newProcState(rt *runtimeT) *procState {
	return &procState{rt: rt, meshes: map[string]*localMesh{}, names: map[string]*localMesh{}}
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
	Procs []string           `msgpack:"procs"` // the proc of every member, by base rank
	Owner string             `msgpack:"owner"` // the proc that owns the mesh: failures go there
}

// stopReq (wire.OpStop) stops the receiving proc's members of a mesh.
type stopReq struct {
	Mesh string `msgpack:"mesh"`
}

// deliver hands a mesh message to each local member in its region.
func (ps *procState) deliver(f wire.Frame, subject string) {
	var lm *localMesh
	if m := ps.byID.Load(); m != nil {
		lm = (*m)[f.Target]
	}
	if lm == nil {
		ps.rt.drop(wire.DropIDs, subject, fmt.Errorf("a call to mesh %.40q, not hosted here", f.Target))
		return
	}
	if f.Port != 0 && !wire.ValidID(f.ReplyTo) {
		ps.rt.drop(wire.DropIDs, subject, fmt.Errorf("a call to mesh %s with reply port %.40q#%d", lm.name, f.ReplyTo, f.Port))
		return
	}
	view := lm.whole
	if f.Region != nil {
		r, err := wireRegion(f.Region).toRegion(lm.base)
		if err != nil {
			ps.rt.drop(wire.DropRegion, subject, fmt.Errorf("mesh %s: %w", lm.name, err))
			return
		}
		view = &r
	}
	if f.Port != 0 {
		ps.rt.portNamedOpen(f.ReplyTo, f.Port)
	}
	stopped := lm.stopped.Load()
	for _, a := range lm.members {
		idx, ok := a.baseRank, true
		if view != lm.whole {
			idx, ok = view.messageRank(a.baseRank)
		}
		if !ok {
			continue
		}
		var refused error
		if stopped {
			refused = fmt.Errorf("%w: mesh %s was stopped", ErrStopped, lm.name)
		} else {
			refused = a.deadErr()
		}
		if refused != nil {
			if f.Port != 0 {
				ps.rt.sendErrorToPort(portRef{proc: f.ReplyTo, id: f.Port, rank: idx}, refused)
			}
			continue
		}
		e := envelope{method: f.Method, payload: f.Payload, view: view, msgIdx: idx}
		if f.Port != 0 {
			e.reply = portRef{proc: f.ReplyTo, id: f.Port, rank: idx}
			if f.Rank >= 0 {
				e.reply.rank = f.Rank // the sender chose the rank (remote functions)
			}
		}
		a.enqueue(e)
	}
}

// control runs a control op, once readControl has checked it. It is
// called on the dispatcher goroutine and must not block: user code (Init)
// runs on the actors' goroutines.
func (ps *procState) control(f *wire.Frame, subject string) {
	rt := ps.rt
	body, kind, err := readControl(f)
	if err != nil {
		rt.drop(kind, subject, err)
		if wire.OpReplies(f.Method) && f.Port != 0 && wire.ValidID(f.ReplyTo) {
			rt.sendErrorToPort(portRef{proc: f.ReplyTo, id: f.Port}, fmt.Errorf("%w: %v", ErrDecode, err))
		}
		return
	}
	reply := portRef{proc: f.ReplyTo, id: f.Port}
	if wire.OpReplies(f.Method) {
		rt.portNamedOpen(reply.proc, reply.id)
	}
	switch f.Method {
	case wire.OpSpawn:
		req := body.(*spawnReq)
		if err := ps.spawn(req, reply); err != nil {
			reply.rank = req.Ranks[0]
			rt.sendErrorToPort(reply, err)
		}
	case wire.OpStop:
		ps.stopMesh(body.(*stopReq).Mesh)
	case wire.OpGone:
		rt.procGone(*body.(*wire.GoneNotice))
	case wire.OpPortGone:
		rt.portClosed(f.ReplyTo, body.(*wire.PortGone).ID)
	case wire.OpSpawnProcs:
		req := body.(*wire.SpawnProcsReq)
		go rt.host.spawnProcs(*req, portRef{proc: req.Proc, id: req.Port})
	case wire.OpStopProcs:
		req := body.(*wire.StopProcsReq)
		reply.rank = req.Rank
		go func() {
			rt.host.stopProcs(req.IDs, rt.opts.stopTimeout)
			rt.sendToPort(reply, 0, func(e *msgpack.Encoder) error { return e.EncodeNil() })
		}()
	case wire.OpSyncLogs:
		req := body.(*wire.StopProcsReq)
		reply.rank = req.Rank
		go func() {
			rt.host.syncLogs(req.IDs)
			rt.sendToPort(reply, 0, func(e *msgpack.Encoder) error { return e.EncodeNil() })
		}()
	case wire.OpAgentsHello:
		rt.reportAgent()
	case wire.OpHeartbeat:
		rt.sawHeartbeat(f.ReplyTo)
	case wire.OpFailure:
		rt.handleFailure(body.(*MeshFailure))
	}
}

func (ps *procState) spawn(req *spawnReq, reply portRef) error {
	rt := ps.rt
	at, err := lookupTypeName(req.Type)
	if err != nil {
		return err
	}
	base, err := NewExtent(req.Dims)
	if err != nil {
		return err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if old := ps.names[req.Name]; old != nil {
		return fmt.Errorf("%w: %q is a live mesh on proc %s", ErrNameTaken, req.Name, rt.procID)
	}
	if ps.meshes[req.Mesh] != nil {
		return fmt.Errorf("%w: mesh id %s spawned twice on proc %s", ErrNameTaken, req.Mesh, rt.procID)
	}
	whole := wholeRegion(base)
	if len(req.Procs) != base.NumRanks() {
		return fmt.Errorf("%w: spawn of %q: %d procs for %v", ErrDecode, req.Name, len(req.Procs), base)
	}
	lm := &localMesh{rt: rt, id: req.Mesh, name: req.Name, typ: at, base: base, whole: &whole, procs: req.Procs, owner: req.Owner}
	// Subscribe before the first Init reply goes out: the spawner sends
	// calls only after every reply, and the server has the SUB by then.
	if lm.sub, err = rt.conn.Subscribe(rt.meshSubjectOf(req.Mesh)); err != nil {
		return err
	}
	for _, r := range req.Ranks {
		if r < 0 || r >= base.NumRanks() {
			lm.sub.Unsubscribe()
			return fmt.Errorf("%w: rank %d of %v", ErrOutOfRange, r, base)
		}
	}
	for _, r := range req.Ranks {
		a := newActor(lm, r)
		lm.members = append(lm.members, a)
		reply.rank = r
		a.enqueue(envelope{init: true, payload: req.Args, reply: reply, msgIdx: r})
		go a.run()
	}
	ps.meshes[lm.id] = lm
	ps.names[lm.name] = lm
	ps.publish()
	return nil
}

// stopMesh stops this proc's members of a mesh; their queued calls fail
// with ErrStopped.
//
// The mesh stays subscribed as a tombstone: a later call to it, from any
// holder of a reference, is answered with ErrStopped instead of vanishing.
func (ps *procState) stopMesh(id string) {
	ps.mu.Lock()
	lm := ps.meshes[id]
	if lm != nil && ps.names[lm.name] == lm {
		delete(ps.names, lm.name) // the name may be spawned again
	}
	ps.mu.Unlock()
	if lm == nil || lm.stopped.Swap(true) {
		return
	}
	for _, a := range lm.members {
		a.stop()
	}
}

func (ps *procState) stopAll() {
	ps.mu.Lock()
	ids := make([]string, 0, len(ps.meshes))
	for id := range ps.meshes {
		ids = append(ids, id)
	}
	ps.mu.Unlock()
	for _, id := range ids {
		ps.stopMesh(id)
	}
}
