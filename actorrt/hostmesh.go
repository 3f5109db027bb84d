package actorrt

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// hostInfo is one host of a HostMesh: the proc whose host agent serves it.
type hostInfo struct {
	Agent string `msgpack:"agent"`
	Name  string `msgpack:"name"`
}

// HostMesh is a mesh of hosts that can start procs. ThisHost(ctx) is the
// machine this process runs on, with the zero Extent.
type HostMesh struct {
	rt    *core // the runtime it belongs to: procs are started from there
	reg   region
	hosts []hostInfo // by base rank
	err   error
}

// ThisHost is the host this process runs on, in the runtime ctx belongs
// to (Main's function's ctx, or an endpoint's *Context).
func ThisHost(ctx context.Context) *HostMesh {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return &HostMesh{err: err}
	}
	return thisHostOf(rt)
}

func thisHostOf(rt *core) *HostMesh {
	return &HostMesh{rt: rt, reg: wholeRegion(Extent{}), hosts: []hostInfo{{Agent: rt.procID, Name: rt.hostname}}}
}

// HostsFromConfig returns the job's hosts, as described by the
// MONARCH_HOSTS file named by the environment variable env (normally
// "MONARCH_HOSTS"), with extent {hosts: N}.
//
// Under `monarch run` (or `monarch local --hosts N`) the launcher has
// started a host agent on every host: HostsFromConfig waits until all
// have reported (at most the spawn timeout, or until ctx ends) and returns
// them. Run directly,
// a "local" hosts file gets its simulated hosts started here, as procs of
// this machine; the other schedulers need the launcher and say so.
func HostsFromConfig(ctx context.Context, env string) (*HostMesh, error) {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return nil, err
	}
	c := rt.client()
	if c != nil && c.launched != nil {
		return c.launched.hosts(ctx)
	}
	path := os.Getenv(env)
	if path == "" {
		return nil, fmt.Errorf("%w: $%s is not set: name a hosts file there, or run the program with `monarch run job.toml`", ErrNoHostsConfig, env)
	}
	cfg, err := hostsconfig.LoadHosts(path)
	if err != nil {
		return nil, fmt.Errorf("actorrt: HostsFromConfig: %w", err)
	}
	if cfg.Scheduler != hostsconfig.SchedulerLocal {
		return nil, fmt.Errorf("actorrt: HostsFromConfig: %s: scheduler %q starts its hosts through the launcher: run the program with `monarch run job.toml`", path, cfg.Scheduler)
	}
	if cfg.Bus.Hubs > 1 {
		return nil, fmt.Errorf("actorrt: HostsFromConfig: %s: [bus] hubs = %d needs the launcher: run the program with `monarch run job.toml` or `monarch local`", path, cfg.Bus.Hubs)
	}
	n := 1
	if cfg.Local != nil {
		n = cfg.Local.Hosts
	}
	return rt.simulatedHosts(ctx, n)
}

// simulatedHosts starts n simulated hosts as procs of this runtime's
// host: the HostMesh of a "local" hosts file.
func (rt *core) simulatedHosts(ctx context.Context, n int) (*HostMesh, error) {
	c := rt.client()
	// A simulated host is a proc of this machine: every proc has a host
	// agent, so its children are that host's procs. Its name, h0, h1, ...,
	// tags its procs' lines; it is counted as a host, not a proc. Like a
	// real host it runs its own bus, a leaf of the job's hub, which its
	// procs dial.
	hostBus := rt.bus.Leaf != ""
	agents, err := thisHostOf(rt).spawnProcs(ctx, Dims{{"hosts", n}}, procOptions{env: func(p Point) []string {
		return jobenv.Env{HostName: jobenv.AgentID(p.Rank()), HostBus: hostBus}.Environ()
	}, hosts: true})
	if err != nil {
		return nil, err
	}
	if c != nil {
		c.counts.HostsNotProcs(agents.ids())
		c.spawnedMu.Lock()
		c.hostMesh = agents
		c.spawnedMu.Unlock()
	}
	hosts := make([]hostInfo, n)
	for i, p := range agents.procs {
		// Its name, as its procs' lines are tagged (p.Host is the
		// machine it shares with the others).
		hosts[i] = hostInfo{Agent: p.ID, Name: jobenv.AgentID(i)}
	}
	return &HostMesh{rt: rt, reg: agents.reg, hosts: hosts}, nil
}

// Extent is the shape of the (sliced) host mesh.
func (h *HostMesh) Extent() Extent { return h.reg.extent() }

// Err is the error a Slice or At left on the mesh, if any.
func (h *HostMesh) Err() error { return h.err }

// Slice keeps dimension dim with indices [start, end).
func (h *HostMesh) Slice(dim string, start, end int) *HostMesh {
	if h.err != nil {
		return h
	}
	r, err := h.reg.slice(dim, start, end)
	return &HostMesh{rt: h.rt, reg: r, hosts: h.hosts, err: err}
}

// At fixes dimension dim to index i and drops it.
func (h *HostMesh) At(dim string, i int) *HostMesh {
	if h.err != nil {
		return h
	}
	r, err := h.reg.at(dim, i)
	return &HostMesh{rt: h.rt, reg: r, hosts: h.hosts, err: err}
}

func (h *HostMesh) String() string { return fmt.Sprintf("HostMesh%v", h.Extent()) }

// Up returns the hosts of the mesh whose agents are not known to be gone,
// in the mesh's order, as a new mesh {hosts: n}, and the names of the
// others: what a job that goes on after losing hosts spawns on next. A
// host is known gone once its procs' ends say so (ProcEnd.Status -1). With
// no host lost (or no runtime, or an error on it) the mesh itself is
// returned.
func (h *HostMesh) Up() (up *HostMesh, lost []string) {
	if h.err != nil || h.rt == nil {
		return h, nil
	}
	var keep []hostInfo
	for r := range h.Extent().NumRanks() {
		hi := h.hosts[h.reg.baseRank(r)]
		if _, gone := h.rt.health.knows(hi.Agent); gone && hi.Agent != h.rt.procID {
			lost = append(lost, hi.Name)
			continue
		}
		keep = append(keep, hi)
	}
	if len(lost) == 0 {
		return h, nil
	}
	ext, err := NewExtent(Dims{{"hosts", len(keep)}})
	if err != nil {
		// Every host lost: a mesh that spawns nothing, saying why.
		return &HostMesh{rt: h.rt, hosts: keep, err: fmt.Errorf("actorrt: every host of %v is lost: %s", h.Extent(), strings.Join(lost, ", "))}, lost
	}
	return &HostMesh{rt: h.rt, reg: wholeRegion(ext), hosts: keep}, lost
}

// SpawnProcs starts procs on every host of the mesh: one per point of
// perHost, each a new OS process running this program in worker mode (or
// the command of WithCommand). The ProcMesh's extent is the host mesh's
// dimensions followed by perHost's. It waits (at most the spawn timeout)
// until every proc serves; on failure it stops those that started and
// returns the error. ctx bounds the wait too.
//
// Every proc finds the torchrun variables (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, TORCHELASTIC_RUN_ID, CUDA_VISIBLE_DEVICES) and
// MONARCH_RANK_<DIM>/MONARCH_SIZE_<DIM>. MASTER_PORT is a port that rank
// 0's host agent found free for this mesh: two meshes get two ports.
func (h *HostMesh) SpawnProcs(ctx context.Context, perHost Dims, opts ...ProcOption) (*ProcMesh, error) {
	var o procOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("actorrt: SpawnProcs: %w", err)
		}
	}
	return h.spawnProcs(ctx, perHost, o)
}

func (h *HostMesh) spawnProcs(ctx context.Context, perHost Dims, o procOptions) (*ProcMesh, error) {
	if h == nil {
		return nil, fmt.Errorf("actorrt: SpawnProcs on a nil HostMesh")
	}
	if h.err != nil {
		return nil, h.err
	}
	rt := h.rt
	if rt == nil {
		return nil, ErrNotStarted
	}
	ext, err := NewExtent(append(h.Extent().Dims(), perHost...))
	if err != nil {
		return nil, fmt.Errorf("actorrt: SpawnProcs: %w", err)
	}
	if o.restart != nil && o.command != nil {
		return nil, fmt.Errorf("actorrt: SpawnProcs: %w: WithProcRestart with WithCommand: a command mesh's ends are told by Ends alone", ErrBadArgs)
	}
	if o.sparesAnyHost && o.spares == 0 {
		return nil, fmt.Errorf("actorrt: SpawnProcs: %w: WithSparesAnyHost without WithSpares: no spares to take a slot", ErrBadArgs)
	}
	if o.spares > 0 && (o.command != nil || o.wrap != nil) {
		return nil, fmt.Errorf("actorrt: SpawnProcs: %w: WithSpares with WithCommand or WithWrapper: a command or a wrapper cannot take its rank late", ErrBadArgs)
	}
	var plan *restartPlanner
	if o.restart != nil {
		if plan, err = newRestartPlanner(*o.restart, ext); err != nil {
			return nil, fmt.Errorf("actorrt: SpawnProcs: WithProcRestart: %w", err)
		}
	}
	fail := func(err error) (*ProcMesh, error) {
		return nil, fmt.Errorf("actorrt: SpawnProcs %v: %w", ext, err)
	}
	perN := 1
	for _, d := range perHost {
		perN *= d.Size
	}
	n := ext.NumRanks()
	procs := make([]procInfo, n)
	waits := make([]string, 0, n+len(h.hosts))
	for r := range procs {
		hi := h.hosts[h.reg.baseRank(r/perN)]
		procs[r] = procInfo{ID: rt.procs.newProcID(hi.Agent), Host: hi.Name, Agent: hi.Agent}
		if o.command == nil {
			// An SDK proc reports ready itself: its end first fails the
			// spawn. A command's agent reports it, before its end, which
			// is the command's to tell (Ends), not a failure to start.
			waits = append(waits, procs[r].ID)
		}
	}
	if err := rt.health.anyGone([]string{procs[0].Agent}); err != nil {
		return fail(err)
	}
	master, err := rt.procs.freePort(ctx, procs[0].Agent, procs[0].Host)
	if err != nil {
		return fail(err)
	}
	gpusDim := o.gpusDim
	if gpusDim == "" {
		gpusDim = "gpus"
	}
	name := o.name
	if name == "" {
		name = rt.newMeshName()
	}
	reqs := map[string]*wire.SpawnProcsReq{}
	var agents []string
	for r, p := range procs {
		req := reqs[p.Agent]
		if req == nil {
			req = &wire.SpawnProcsReq{Command: o.command, Mesh: name, Spares: o.spares}
			reqs[p.Agent] = req
			agents = append(agents, p.Agent)
			waits = append(waits, p.Agent)
		}
		pt := ext.point(r)
		req.IDs = append(req.IDs, p.ID)
		req.Ranks = append(req.Ranks, r)
		env := append(rankEnv(pt), torchEnv(rt.job, ext, r, perN, master, gpusDim)...)
		if o.env != nil {
			env = append(env, o.env(pt)...)
		}
		req.Env = append(req.Env, env)
		if o.wrap != nil {
			req.Wrap = append(req.Wrap, o.wrap(pt))
		}
		if o.cpus != nil {
			req.CPUs = append(req.CPUs, o.cpus(pt))
		}
	}
	// The ready port fails as soon as a new proc or an agent is gone.
	fut := newFuture[ValueMesh[wire.ProcReady]](label{mesh: "SpawnProcs " + ext.String()})
	port, err := rt.ports.open(newCallPort[wire.ProcReady](fut, ext), waits)
	if err != nil {
		return nil, err
	}
	defer rt.ports.close(port)
	if err := rt.health.anyGone(agents); err != nil {
		return fail(err)
	}
	// Ends are heard from now on: a command may end before the spawn
	// returns.
	ends := newProcEnds(ext, procs)
	rt.procs.watchEnds(ends)
	// Watch the agents first: a new proc that ends before it is ready is
	// heard of.
	rt.health.started(procs, true)
	pm := &ProcMesh{rt: rt, reg: wholeRegion(ext), procs: procs, ends: ends, command: o.command != nil, name: name}
	for _, a := range agents {
		req := reqs[a]
		req.Proc, req.Port = rt.procID, port
		if err := rt.sendControl(a, wire.OpSpawnProcs, port, req); err != nil {
			pm.Stop(context.WithoutCancel(ctx))
			return fail(err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, rt.opts.spawnTimeout)
	defer cancel()
	ready, err := fut.Get(waitCtx)
	if err != nil {
		pm.Stop(context.WithoutCancel(ctx))
		return fail(err)
	}
	for r, rd := range ready.Values() {
		procs[r].Host, procs[r].PID = rd.Host, rd.PID
	}
	ends.started(procs)
	if o.sparesAnyHost {
		rt.procs.allowAdopt(name, reqs, agents)
	}
	if o.command == nil && !o.hosts {
		rt.sup.ownProcs(rt.newMeshID(), pm, actorOf(ctx), plan)
	}
	rt.role.procsStarted(pm)
	return pm, nil
}

// torchEnv is what a training program started by torchrun would find:
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK (the host's
// index), ROLE_RANK and ROLE_WORLD_SIZE (one role: the mesh),
// TORCHELASTIC_RUN_ID (the job), MASTER_ADDR and MASTER_PORT (rank 0's
// host and a port free there) and, with a gpusDim dimension,
// CUDA_VISIBLE_DEVICES.
func torchEnv(job string, ext Extent, rank, perHost int, master wire.FreePort, gpusDim string) []string {
	world := strconv.Itoa(ext.NumRanks())
	env := []string{
		"RANK=" + strconv.Itoa(rank),
		"LOCAL_RANK=" + strconv.Itoa(rank%perHost),
		"WORLD_SIZE=" + world,
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(perHost),
		"GROUP_RANK=" + strconv.Itoa(rank/perHost),
		"ROLE_RANK=" + strconv.Itoa(rank),
		"ROLE_WORLD_SIZE=" + world,
		"TORCHELASTIC_RUN_ID=" + job,
		"MASTER_ADDR=" + master.Addr,
		"MASTER_PORT=" + strconv.Itoa(master.Port),
	}
	if g, ok := ext.point(rank).Get(gpusDim); ok {
		env = append(env, "CUDA_VISIBLE_DEVICES="+strconv.Itoa(g))
	}
	return env
}

// JobProcs is the per-host procs a job file asks for ([procs] in the job,
// which `monarch run` passes to its client), or def when the program was
// not started from a job file, or outside the client (ctx is Main's
// function's).
func JobProcs(ctx context.Context, def Dims) Dims {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return def
	}
	c := rt.client()
	if c == nil || len(c.jobProcs) == 0 {
		return def
	}
	dims := make(Dims, len(c.jobProcs))
	for i, d := range c.jobProcs {
		dims[i] = Dim{d.Name, d.Size}
	}
	if _, err := NewExtent(dims); err != nil {
		return def
	}
	return dims
}

// rankEnv tells a proc where it is: MONARCH_RANK_<DIM> and
// MONARCH_SIZE_<DIM> for each dimension of its mesh.
func rankEnv(p Point) []string {
	dims := make([]hostsconfig.Dim, len(p.ext.dims))
	for i, d := range p.ext.dims {
		dims[i] = hostsconfig.Dim{Name: d.Name, Size: d.Size}
	}
	return jobenv.RankVars(dims, p.coords)
}
