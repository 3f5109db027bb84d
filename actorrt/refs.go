package actorrt

import (
	"context"
	"fmt"
	"reflect"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Meshes travel as endpoint arguments: an *ActorMesh, *ProcMesh or
// *HostMesh (or a slice of one) passed to an endpoint arrives as a working
// reference in the receiving proc, and the adverbs work there as they do
// in the client. What travels is the mesh's identity, shape, selected
// region and where its members live; ownership stays with the creator.

// regionWire is a region in a mesh reference: the base dimensions and its
// wire form (start, size and kept per dimension).
type regionWire struct {
	Dims Dims  `msgpack:"dims"`
	Box  []int `msgpack:"box"`
}

func toRegionWire(r region) regionWire {
	return regionWire{Dims: r.base.dims, Box: r.appendWire(make([]int, 0, 3*len(r.start)))}
}

func (w regionWire) region(ranks int) (region, error) {
	base, err := NewExtent(w.Dims)
	if err != nil {
		return region{}, fmt.Errorf("%w: mesh reference: %v", ErrDecode, err)
	}
	if base.NumRanks() != ranks {
		return region{}, fmt.Errorf("%w: mesh reference: extent %v for %d members", ErrDecode, base, ranks)
	}
	return wireRegion(w.Box).toRegion(base)
}

type actorMeshWire struct {
	ID     string     `msgpack:"id"`
	Name   string     `msgpack:"name"`
	Type   string     `msgpack:"type"`
	Region regionWire `msgpack:"region"`
	Procs  []string   `msgpack:"procs"`
	Agents []string   `msgpack:"agents"` // the host agent of each member's proc
	// Owner, for a mesh with a restart policy (Restart): where to ask
	// where members whose proc ended are now; Moved, those already known.
	Owner   string      `msgpack:"owner,omitempty"`
	Restart bool        `msgpack:"restart,omitempty"`
	Moved   []movedWire `msgpack:"moved,omitempty"`
}

// toWire is the reference to region reg of the mesh, as it travels.
func (r *meshRef) toWire(reg region) actorMeshWire {
	return actorMeshWire{ID: r.id, Name: r.name, Type: r.typ.name, Region: toRegionWire(reg), Procs: r.procs, Agents: r.agents,
		Owner: r.owner, Restart: r.restartable, Moved: r.moves.Load().wire()}
}

// encodeWire sends the mesh reference; a mesh holding an error (a bad
// slice) cannot be sent.
func (m *ActorMesh[A]) encodeWire(e *msgpack.Encoder) error {
	if m.err != nil {
		return m.err
	}
	if m.ref == nil {
		return fmt.Errorf("actorrt: a mesh that was not spawned cannot be sent")
	}
	w := m.ref.toWire(m.reg)
	return e.Encode(&w)
}

// decodeWire rebinds a received mesh reference in this proc.
func (m *ActorMesh[A]) decodeWire(d *msgpack.Decoder) error {
	var w actorMeshWire
	if err := d.Decode(&w); err != nil {
		return err
	}
	rt, err := decodingRuntime(d)
	if err != nil {
		return err
	}
	if want := typeName(reflect.TypeFor[A]()); want != w.Type {
		if _, err := lookupTypeName(w.Type); err != nil {
			return err
		}
		return fmt.Errorf("%w: a mesh of %s where a mesh of %s was expected", ErrDecode, w.Type, want)
	}
	ref, reg, err := w.bind(rt)
	if err != nil {
		return err
	}
	m.ref, m.reg, m.err = ref, reg, nil
	// Hear of the ends of its procs from now on.
	rt.health.started(ref.procInfos(), false)
	return nil
}

// bind checks a received mesh reference and makes it one of this
// process: its type must be registered here, its region must fit its
// members, and its ids must be fit to become subjects.
func (w *actorMeshWire) bind(rt *core) (*meshRef, region, error) {
	if err := w.check(); err != nil {
		return nil, region{}, err
	}
	at, err := lookupTypeName(w.Type)
	if err != nil {
		return nil, region{}, err
	}
	reg, err := w.Region.region(len(w.Procs))
	if err != nil {
		return nil, region{}, err
	}
	ref := &meshRef{rt: rt, id: w.ID, name: w.Name, typ: at, subject: rt.subjects.Mesh(w.ID), procs: w.Procs, agents: w.Agents, all: uniq(w.Procs),
		owner: w.Owner, restartable: w.Restart}
	if mv := movesOf(w.Moved); mv != nil {
		ref.moves.Store(mv)
	}
	return ref, reg, nil
}

// check checks what a mesh reference names, without the runtime: its
// id, the procs and agents of its members, and its region against them.
func (w *actorMeshWire) check() error {
	if !wire.ValidID(w.ID) || isSystemMesh(w.ID) || !validName(w.Name) || w.Type == "" {
		return fmt.Errorf("%w: mesh reference: mesh %.40q (id %.40q) of type %.40q", ErrDecode, w.Name, w.ID, w.Type)
	}
	if len(w.Agents) != len(w.Procs) {
		return fmt.Errorf("%w: mesh reference: %d agents for %d members", ErrDecode, len(w.Agents), len(w.Procs))
	}
	for i := range w.Procs {
		if err := checkProcRef(w.Procs[i], w.Agents[i]); err != nil {
			return err
		}
	}
	if w.Owner != "" && !wire.ValidID(w.Owner) {
		return fmt.Errorf("%w: mesh reference: owner %.40q", ErrDecode, w.Owner)
	}
	if err := checkMoved(w.Moved, len(w.Procs)); err != nil {
		return err
	}
	_, err := w.Region.region(len(w.Procs))
	return err
}

// checkMoved checks the moved members of a mesh of n members.
func checkMoved(ws []movedWire, n int) error {
	for _, m := range ws {
		if m.Rank < 0 || m.Rank >= n {
			return fmt.Errorf("%w: mesh reference: moved member %d of %d", ErrDecode, m.Rank, n)
		}
		if err := checkProcRef(m.Proc, m.Agent); err != nil {
			return err
		}
	}
	return nil
}

type procMeshWire struct {
	Region  regionWire `msgpack:"region"`
	Procs   []procInfo `msgpack:"procs"`
	Command bool       `msgpack:"command,omitempty"`
	Name    string     `msgpack:"name,omitempty"`
}

// encodeWire sends the proc mesh reference.
func (p *ProcMesh) encodeWire(e *msgpack.Encoder) error {
	if p.err != nil {
		return p.err
	}
	procs := p.procs
	if p.rt != nil && p.rt.procs.nReplaced.Load() != 0 {
		// The receiver reaches the slots' procs as this process knows them.
		procs = make([]procInfo, len(p.procs))
		for b := range procs {
			procs[b] = p.proc(b)
		}
	}
	return e.Encode(&procMeshWire{Region: toRegionWire(p.reg), Procs: procs, Command: p.command, Name: p.name})
}

// decodeWire rebinds a received proc mesh reference.
func (p *ProcMesh) decodeWire(d *msgpack.Decoder) error {
	var w procMeshWire
	if err := d.Decode(&w); err != nil {
		return err
	}
	rt, err := decodingRuntime(d)
	if err != nil {
		return err
	}
	reg, err := w.Region.region(len(w.Procs))
	if err != nil {
		return err
	}
	for _, pi := range w.Procs {
		if err := checkProcRef(pi.ID, pi.Agent); err != nil {
			return err
		}
	}
	p.rt, p.reg, p.procs, p.err, p.command, p.name = rt, reg, w.Procs, nil, w.Command, w.Name
	rt.health.started(w.Procs, false)
	return nil
}

type hostMeshWire struct {
	Region regionWire `msgpack:"region"`
	Hosts  []hostInfo `msgpack:"hosts"`
}

// encodeWire sends the host mesh reference.
func (h *HostMesh) encodeWire(e *msgpack.Encoder) error {
	if h.err != nil {
		return h.err
	}
	return e.Encode(&hostMeshWire{Region: toRegionWire(h.reg), Hosts: h.hosts})
}

// decodeWire rebinds a received host mesh reference: SpawnProcs from
// here starts procs through the same host agents.
func (h *HostMesh) decodeWire(d *msgpack.Decoder) error {
	var w hostMeshWire
	if err := d.Decode(&w); err != nil {
		return err
	}
	rt, err := decodingRuntime(d)
	if err != nil {
		return err
	}
	reg, err := w.Region.region(len(w.Hosts))
	if err != nil {
		return err
	}
	h.rt, h.reg, h.hosts, h.err = rt, reg, w.Hosts, nil
	return nil
}

// checkProcRef checks a proc and its agent as a reference names them:
// they become subject tokens, so a wildcard or an empty token must not
// get in (an empty agent is allowed: not known).
func checkProcRef(proc, agent string) error {
	if !wire.ValidID(proc) || agent != "" && !wire.ValidID(agent) {
		return fmt.Errorf("%w: mesh reference: proc %.40q of agent %.40q", ErrDecode, proc, agent)
	}
	return nil
}

// Unmarshal decodes msgpack data into v as the runtime decodes an
// endpoint's arguments: a mesh or port reference in it binds to the
// runtime ctx belongs to (an endpoint's *Context, or Main's function's
// ctx). It is for references a program encoded itself (msgpack.Marshal of
// a mesh): a reference decoded by msgpack.Unmarshal has no runtime, and
// fails with ErrNotStarted.
func Unmarshal(ctx context.Context, data []byte, v any) error {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return err
	}
	return decodeIn(rt, data, []reflect.Type{reflect.TypeOf(v)}, func(d *msgpack.Decoder) error { return d.Decode(v) })
}
