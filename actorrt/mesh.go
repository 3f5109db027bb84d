package actorrt

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/delivery"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// procInfo is one proc of a ProcMesh.
type procInfo struct {
	ID    string `msgpack:"id"`
	Host  string `msgpack:"host"`
	PID   int    `msgpack:"pid"`
	Agent string `msgpack:"agent"` // the proc whose host agent started it
}

// ProcMesh is a mesh of procs (OS processes) that actors can be spawned
// on. Slicing it selects procs; it is an immutable value, safe to share.
type ProcMesh struct {
	rt      *core // the runtime it belongs to
	reg     region
	procs   []procInfo // by base rank
	err     error
	ends    *procEnds // the ends of the procs SpawnProcs started here
	command bool      // they run a command (WithCommand), not this program
	name    string    // see Name
	// replaces is the proc this mesh's one proc was started in place of
	// (respawn), for the job state feed; "" for a mesh SpawnProcs made.
	replaces string
}

// Name is the mesh's name: WithName's, or one SpawnProcs made up
// ("procs1", "procs2", ... in the client; prefixed with the spawning
// proc's id elsewhere). Its procs' lines carry it, so that `monarch logs
// --mesh` can pick them, and a job whose procs of several meshes print
// shows it in their prefix: [trainer 0]. "" for ThisProc.
func (p *ProcMesh) Name() string { return p.name }

// ThisProc is this process, as a mesh of one proc with the zero Extent,
// in the runtime ctx belongs to (Main's function's ctx, or an endpoint's
// *Context).
func ThisProc(ctx context.Context) *ProcMesh {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return &ProcMesh{err: err}
	}
	return &ProcMesh{rt: rt, reg: wholeRegion(Extent{}), procs: []procInfo{{ID: rt.procID, Host: rt.hostname, Agent: rt.startedBy}}}
}

// proc is the proc at base rank b now: its slot's newest incarnation
// that this runtime knows of (a proc that ended may have been replaced
// by one its host agent started in its place).
func (p *ProcMesh) proc(b int) procInfo {
	if p.rt == nil {
		return p.procs[b]
	}
	return p.rt.procs.current(p.procs[b])
}

// runtime is the runtime the mesh belongs to.
func (p *ProcMesh) runtime() (*core, error) {
	if p.err != nil {
		return nil, p.err
	}
	if p.rt == nil {
		return nil, ErrNotStarted
	}
	return p.rt, nil
}

// Extent is the shape of the (sliced) mesh.
func (p *ProcMesh) Extent() Extent { return p.reg.extent() }

// Err is the error a Slice or At left on the mesh, if any; every use of
// the mesh returns it too.
func (p *ProcMesh) Err() error { return p.err }

// Slice keeps dimension dim with indices [start, end).
func (p *ProcMesh) Slice(dim string, start, end int) *ProcMesh {
	if p.err != nil {
		return p
	}
	r, err := p.reg.slice(dim, start, end)
	return &ProcMesh{rt: p.rt, reg: r, procs: p.procs, err: err, ends: p.ends, command: p.command, name: p.name}
}

// At fixes dimension dim to index i and drops it.
func (p *ProcMesh) At(dim string, i int) *ProcMesh {
	if p.err != nil {
		return p
	}
	r, err := p.reg.at(dim, i)
	return &ProcMesh{rt: p.rt, reg: r, procs: p.procs, err: err, ends: p.ends, command: p.command, name: p.name}
}

// Stop stops the procs of the (sliced) mesh: each is asked to exit
// (SIGTERM, for a command), and killed if it has not within the stop
// timeout (WithStopTimeout), or the grace given by WithGrace; their actors
// stop with them, and later calls to those actors fail with ErrStopped.
// Stopping a proc that already ended is not an error, and stops the proc
// a restart started in its place (RestartPolicy), if any; stopping this
// process (ThisProc) is. Every line the procs wrote is printed (or
// recorded) before Stop returns. It waits for the procs' agents, at most
// the stop timeout (or the grace) and a margin, or until ctx ends.
func (p *ProcMesh) Stop(ctx context.Context, opts ...StopOption) error {
	rt, err := p.runtime()
	if err != nil {
		return err
	}
	var o stopOptions
	for _, opt := range opts {
		opt(&o)
	}
	if !o.graced {
		return p.askAgents(ctx, rt, wire.OpStopProcs, 0, rt.opts.stopTimeout+10*time.Second)
	}
	grace := min(max(o.grace, time.Millisecond), wire.MaxStopGrace) // the most a host agent accepts
	return p.askAgents(ctx, rt, wire.OpStopProcs, grace, grace+10*time.Second)
}

// StopOption is an option of ProcMesh.Stop.
type StopOption func(*stopOptions)

type stopOptions struct {
	grace  time.Duration
	graced bool // WithGrace was given
}

// WithGrace gives each proc grace, instead of the stop timeout, between
// its SIGTERM and its SIGKILL: time for a command that catches SIGTERM
// (an SPMD job's, a training script) to checkpoint. The grace is taken
// as at least a millisecond and at most an hour. Without WithGrace, Stop
// leaves the stop timeout.
func WithGrace(grace time.Duration) StopOption {
	return func(o *stopOptions) { o.grace, o.graced = grace, true }
}

// FlushLogs returns once every line the procs wrote before the call has
// reached the client and been printed (or recorded): a flush barrier for
// output, say before printing a result after a call. It waits at most
// 10s, or until ctx ends.
func (p *ProcMesh) FlushLogs(ctx context.Context) error {
	rt, err := p.runtime()
	if err != nil {
		return err
	}
	return p.askAgents(ctx, rt, wire.OpSyncLogs, 0, 10*time.Second)
}

// askAgents sends op for the procs of the mesh to their host agents (with
// grace, for a stop; 0: the agent's stop timeout) and waits (at most d,
// or until ctx ends) for every agent's answer; then, in the client, it
// prints the lines that came before the answers.
func (p *ProcMesh) askAgents(ctx context.Context, rt *core, op string, grace, d time.Duration) error {
	if p.err != nil {
		return p.err
	}
	byAgent, agents, err := p.byAgent(rt, op)
	if err != nil {
		return err
	}
	if len(agents) == 0 {
		return nil
	}
	ext, _ := NewExtent(Dims{{"agents", len(agents)}})
	fut := newFuture[ValueMesh[Void]](label{mesh: op + " " + p.String()})
	port, err := rt.ports.open(newCallPort[Void](fut, ext), agents)
	if err != nil {
		return err
	}
	defer rt.ports.close(port)
	for i, a := range agents {
		req := &wire.StopProcsReq{IDs: byAgent[a], Rank: i, GraceMS: grace.Milliseconds()}
		if err := rt.sendControl(a, op, port, req); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err = fut.Get(ctx)
	// The procs' lines came before their agents' answers: print them.
	rt.role.linesArrived()
	return err
}

// byAgent groups the procs of the (sliced) mesh by the host agent that
// runs them, and lists the agents that are not gone (one that is took its
// procs with it: nothing to ask it). op names the request in the error
// for a mesh that holds this process.
func (p *ProcMesh) byAgent(rt *core, op string) (byAgent map[string][]string, agents []string, err error) {
	byAgent = map[string][]string{}
	for _, b := range p.reg.baseRanks() {
		pi := p.proc(b)
		if pi.ID == rt.procID {
			return nil, nil, fmt.Errorf("actorrt: %s: %s is this process; return from Main instead", op, pi.ID)
		}
		byAgent[pi.Agent] = append(byAgent[pi.Agent], pi.ID)
	}
	for a := range byAgent {
		if rt.health.goneErr(a) == nil {
			agents = append(agents, a)
		}
	}
	return byAgent, agents, nil
}

// ids lists the procs of the (sliced) mesh.
func (p *ProcMesh) ids() []string {
	out := make([]string, 0, p.reg.numRanks())
	for _, b := range p.reg.baseRanks() {
		out = append(out, p.proc(b).ID)
	}
	return out
}

// SliceAt selects the proc at point p: every dimension of p is fixed
// (At), so a point of this mesh's own extent selects a mesh of one.
func (p *ProcMesh) SliceAt(pt Point) *ProcMesh {
	r, err := p.reg, p.err
	for i, d := range pt.ext.dims {
		if err != nil {
			break
		}
		r, err = r.at(d.Name, pt.coords[i])
	}
	return &ProcMesh{rt: p.rt, reg: r, procs: p.procs, err: err, ends: p.ends, command: p.command, name: p.name}
}

func (p *ProcMesh) String() string { return fmt.Sprintf("ProcMesh%v", p.Extent()) }

// ActorMesh is a mesh of actors of type A, as returned by Spawn, or a slice
// of one. Messages go to its members through the adverbs (Call, CallOne,
// Broadcast, Stream, Choose). It is an immutable value, safe to share.
type ActorMesh[A any] struct {
	ref *meshRef
	reg region
	err error
}

// meshRef is what identifies a spawned actor mesh.
type meshRef struct {
	rt      *core // the runtime it belongs to (refs.go binds a received one)
	id      string
	name    string
	typ     *actorType
	subject string
	procs   []string // the proc of each member, by base rank
	agents  []string // the host agent that started each member's proc, by base rank
	all     []string // every proc of the mesh, once
	stopped atomic.Bool
	// owner is the proc that owns the mesh; restartable, that it has a
	// restart policy (or goes on without members, GoOnWithout): a member
	// whose proc ended may live on a new one, which moves records, or be
	// missing (moves.go).
	owner       string
	restartable bool
	moves       atomic.Pointer[memberMoves]
	// spawned is the spawn request (without ranks), in the owner only: a
	// member moved to a new proc is spawned there with it.
	spawned *spawnReq
	dOnce   sync.Once
	d       delivery.Dest
	// counts counts the calls sent through it (feed.go), once the
	// first is.
	counts atomic.Pointer[meshCounts] // the mesh's subject, as delivery numbers it (dest)
	// queue holds calls made while where members live is refreshed.
	queue sendQueue
	// missing are the members the mesh goes on without (moves.go).
	missing atomic.Pointer[missingMarks]
}

// dest is the mesh's subject as the delivery layer knows it, made once.
func (r *meshRef) dest(s jobenv.Subjects) delivery.Dest {
	r.dOnce.Do(func() { r.d = delivery.ToGroup(s, r.id, r.all) })
	return r.d
}

// procInfos lists the procs of the mesh with their agents, for health.
func (r *meshRef) procInfos() []procInfo {
	out := make([]procInfo, 0, len(r.all))
	seen := map[string]bool{}
	for b := range r.procs {
		if p := r.procOf(b); !seen[p] {
			seen[p] = true
			out = append(out, procInfo{ID: p, Agent: r.agentOf(b)})
		}
	}
	return out
}

// procsOf lists the procs that host members of reg, once each.
func (r *meshRef) procsOf(reg region) []string {
	if r.moves.Load() != nil {
		return r.procsOfMoved(reg)
	}
	if reg.isWhole() {
		return r.all
	}
	if reg.numRanks() == 1 {
		return []string{r.procs[reg.baseRank(0)]}
	}
	var out []string
	var seen map[string]bool // past a few procs: a linear scan would be quadratic
	for _, b := range reg.baseRanks() {
		p := r.procs[b]
		switch {
		case seen != nil:
			if seen[p] {
				continue
			}
			seen[p] = true
		case slices.Contains(out, p):
			continue
		case len(out) == 16:
			seen = make(map[string]bool, 2*len(out))
			for _, q := range out {
				seen[q] = true
			}
			seen[p] = true
		}
		out = append(out, p)
	}
	return out
}

func uniq(procs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range procs {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Name is the name the mesh was spawned with.
func (m *ActorMesh[A]) Name() string {
	if m.ref == nil {
		return ""
	}
	return m.ref.name
}

// Extent is the shape of the (sliced) mesh.
func (m *ActorMesh[A]) Extent() Extent { return m.reg.extent() }

// Err is the error a Slice or At left on the mesh, if any; every adverb on
// the mesh returns it too.
func (m *ActorMesh[A]) Err() error { return m.err }

// Slice keeps dimension dim with indices [start, end) (relative to this
// mesh). The members keep their ranks; their message rank is relative to
// the slice.
func (m *ActorMesh[A]) Slice(dim string, start, end int) *ActorMesh[A] {
	if m.err != nil {
		return m
	}
	r, err := m.reg.slice(dim, start, end)
	return &ActorMesh[A]{ref: m.ref, reg: r, err: err}
}

// At fixes dimension dim to index i and drops it from the extent.
func (m *ActorMesh[A]) At(dim string, i int) *ActorMesh[A] {
	if m.err != nil {
		return m
	}
	r, err := m.reg.at(dim, i)
	return &ActorMesh[A]{ref: m.ref, reg: r, err: err}
}

// Stop stops every actor of the mesh (the whole mesh, even when called on
// a slice): queued calls and answers they still owe fail with ErrStopped,
// and the name can be spawned again (Lookup no longer finds this mesh). It waits until every proc has the
// request (at most the stop timeout, or until ctx ends), not for the
// actors' goroutines to end.
func (m *ActorMesh[A]) Stop(ctx context.Context) error {
	if m.ref == nil {
		return fmt.Errorf("actorrt: Stop on a mesh that was not spawned")
	}
	rt := m.ref.rt
	m.ref.stopped.Store(true)
	rt.sup.meshStopped(m.ref.id) // a stop is not a failure (if owned here)
	stopOn(rt, m.ref.id, m.ref.allProcs())
	rt.role.registry().free(m.ref.id)
	ctx, cancel := context.WithTimeout(ctx, rt.opts.stopTimeout)
	defer cancel()
	return rt.link.Flush(ctx)
}

// SliceAt selects the member at point p: every dimension of p is fixed
// (At). With the actor's own rank, it picks the member at the same place
// in another mesh of the same shape: dataloaders.SliceAt(ctx.ActorInstance().Rank()).
func (m *ActorMesh[A]) SliceAt(p Point) *ActorMesh[A] {
	r, err := m.reg, m.err
	for i, d := range p.ext.dims {
		if err != nil {
			break
		}
		r, err = r.at(d.Name, p.coords[i])
	}
	return &ActorMesh[A]{ref: m.ref, reg: r, err: err}
}

func (m *ActorMesh[A]) String() string {
	return fmt.Sprintf("ActorMesh(%s)%v", m.Name(), m.Extent())
}

// target is what an adverb needs of a mesh.
func (m *ActorMesh[A]) target() meshTarget {
	if m == nil {
		return meshTarget{err: fmt.Errorf("actorrt: nil ActorMesh")}
	}
	return meshTarget{ref: m.ref, reg: m.reg, err: m.err}
}

// Spawn creates an actor mesh of type T named name with one actor on every
// proc of procs, and calls each actor's Init with args. It returns when
// every Init has returned, or the first error, or when ctx ends (at most
// the spawn timeout); on error no actor of the mesh is left running.
// The types of args are checked against Init's parameters first, in the
// caller, before any proc does work (ErrBadArgs); Init1, Init2 and Init3
// spawn with arguments the compiler checks.
//
// The mesh's owner, which hears of its failures (see Supervise), comes
// from ctx: the actor whose endpoint ctx is (or is derived from), else the
// client. The name is registered with the client before Spawn returns, so
// that Lookup finds the mesh from anywhere in the job; a name is unique on
// a proc, not in the job, and Lookup finds the oldest live mesh of a name
// (see the package doc, # Names).
func Spawn[T any](ctx context.Context, procs *ProcMesh, name string, args ...any) (*ActorMesh[T], error) {
	return SpawnPerProc[T](ctx, procs, name, nil, args...)
}

// SpawnPerProc is Spawn with several actors on each proc: the mesh's extent
// is the procs' extent followed by perProc. SpawnPerProc(procs, "w",
// Dims{{"workers", 16}}) on 4 procs gives 64 actors, 16 per proc.
func SpawnPerProc[T any](ctx context.Context, procs *ProcMesh, name string, perProc Dims, args ...any) (*ActorMesh[T], error) {
	return spawnTyped[T](ctx, procs, name, SpawnOptions{PerProc: perProc}, args)
}

func spawnTyped[T any](ctx context.Context, procs *ProcMesh, name string, opts SpawnOptions, args []any) (*ActorMesh[T], error) {
	prepareWire(reflect.TypeFor[ActorMesh[T]]())
	at, err := lookupType(reflect.TypeFor[T]())
	if err != nil {
		return nil, fmt.Errorf("actorrt: Spawn %q: %w", name, err)
	}
	ref, ext, err := spawnMesh(ctx, procs, name, at, opts, args)
	if err != nil {
		return nil, err
	}
	return &ActorMesh[T]{ref: ref, reg: wholeRegion(ext)}, nil
}

func spawnMesh(ctx context.Context, procs *ProcMesh, name string, at *actorType, opts SpawnOptions, args []any) (*meshRef, Extent, error) {
	perProc := opts.PerProc
	fail := func(err error) (*meshRef, Extent, error) {
		return nil, Extent{}, fmt.Errorf("actorrt: Spawn[%s] %q: %w", shortName(at.name), name, err)
	}
	if procs == nil {
		return fail(fmt.Errorf("nil ProcMesh"))
	}
	rt, err := procs.runtime()
	if err != nil {
		return fail(err)
	}
	// ctx says who owns the mesh: an actor, or the client, of the
	// runtime the procs belong to.
	if other, err := runtimeOf(ctx); err == nil && other != rt {
		return fail(fmt.Errorf("%w: ctx belongs to another runtime (job %s) than the procs (job %s)", ErrBadArgs, other.job, rt.job))
	}
	if procs.command {
		return fail(fmt.Errorf("%w: the procs run a command (WithCommand), not this program: they host no actors", ErrBadArgs))
	}
	if !validName(name) {
		return fail(fmt.Errorf("%w: name %q: use letters, digits, '_' or '-'", ErrBadArgs, name))
	}
	if err := checkInitArgs(at, args); err != nil {
		return fail(err)
	}
	if args == nil {
		args = []any{} // an empty array: a nil one would arrive as no bytes at all
	}
	rawArgs, err := wire.MarshalLimited(args, rt.link.MaxMessage(), "Init arguments")
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return fail(err)
		}
		return fail(fmt.Errorf("%w: encode: %v", ErrBadArgs, err))
	}
	ext, err := NewExtent(append(procs.Extent().Dims(), perProc...))
	if err != nil {
		return fail(err)
	}
	var plan *restartPlanner
	if opts.Restart != nil {
		if plan, err = newRestartPlanner(*opts.Restart, ext); err != nil {
			return fail(err)
		}
	}
	perN := 1
	for _, d := range perProc {
		perN *= d.Size
	}
	ref := &meshRef{rt: rt, id: rt.newMeshID(), name: name, typ: at, procs: make([]string, ext.NumRanks()), agents: make([]string, ext.NumRanks()),
		owner: rt.procID, restartable: plan != nil || opts.GoOnWithout}
	ref.subject = rt.subjects.Mesh(ref.id)

	nprocs := procs.reg.numRanks()
	for v := 0; v < nprocs; v++ {
		p := procs.proc(procs.reg.baseRank(v))
		for i := 0; i < perN; i++ {
			ref.procs[v*perN+i], ref.agents[v*perN+i] = p.ID, p.Agent
		}
	}
	ref.all = uniq(ref.procs)
	rt.sup.own(ref, ext, actorOf(ctx), plan, opts.GoOnWithout)
	fail = func(err error) (*meshRef, Extent, error) {
		rt.sup.disown(ref.id)
		return nil, Extent{}, fmt.Errorf("actorrt: Spawn[%s] %q: %w", shortName(at.name), name, err)
	}
	fut := newFuture[ValueMesh[Void]](label{mesh: "spawn " + name})
	port, err := rt.ports.open(newCallPort[Void](fut, ext), ref.all)
	if err != nil {
		return fail(err)
	}
	defer rt.ports.close(port)
	// A proc known to be gone would never answer a spawn; one that goes
	// later fails the port that waits for it. So the check comes after the
	// port is open, and between them they miss nothing.
	if err := rt.health.anyGone(ref.all); err != nil {
		return fail(err)
	}
	sentTo := make([]string, 0, nprocs)
	for v := 0; v < nprocs; v++ {
		p := procs.proc(procs.reg.baseRank(v))
		ranks := make([]int, perN)
		for i := range ranks {
			ranks[i] = v*perN + i
		}
		req := spawnReq{Mesh: ref.id, Name: name, Type: at.name, Dims: ext.dims, Ranks: ranks, Args: rawArgs, Owner: rt.procID, Restart: plan != nil}
		if ref.spawned == nil {
			tmpl := req
			tmpl.Ranks = nil
			ref.spawned = &tmpl
		}
		if err := rt.sendControl(p.ID, wire.OpSpawn, port, &req); err != nil {
			stopOn(rt, ref.id, sentTo)
			return fail(err)
		}
		sentTo = append(sentTo, p.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, rt.opts.spawnTimeout)
	defer cancel()
	if _, err := fut.Get(ctx); err != nil {
		stopOn(rt, ref.id, sentTo)
		return fail(err)
	}
	// The job's registry has the mesh before Spawn returns (a round trip
	// to the client from a proc), so that a Lookup from anywhere finds it.
	if err := rt.role.registry().add(ctx, ref.toWire(wholeRegion(ext))); err != nil {
		stopOn(rt, ref.id, sentTo)
		return fail(err)
	}
	return ref, ext, nil
}

// stopOn stops a mesh's members on the given procs.
func stopOn(rt *core, mesh string, procs []string) {
	for _, p := range procs {
		rt.sendControl(p, wire.OpStop, 0, &stopReq{Mesh: mesh})
	}
}
