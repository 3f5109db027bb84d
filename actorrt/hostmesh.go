package actorrt

import (
	"context"
	"fmt"
)

// hostInfo is one host of a HostMesh: the proc whose host agent serves it.
type hostInfo struct {
	Agent string `msgpack:"agent"`
	Name  string `msgpack:"name"`
}

// HostMesh is a mesh of hosts that can start procs. ThisHost() is the
// machine this process runs on, with the zero Extent.
type HostMesh struct {
	reg   region
	hosts []hostInfo // by base rank
	err   error
}

// ThisHost is the host this process runs on.
func ThisHost() *HostMesh {
	rt, err := getRuntime()
	if err != nil {
		return &HostMesh{err: err}
	}
	return &HostMesh{reg: wholeRegion(Extent{}), hosts: []hostInfo{{Agent: rt.procID, Name: rt.hostname}}}
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
	return &HostMesh{reg: r, hosts: h.hosts, err: err}
}

// At fixes dimension dim to index i and drops it.
func (h *HostMesh) At(dim string, i int) *HostMesh {
	if h.err != nil {
		return h
	}
	r, err := h.reg.at(dim, i)
	return &HostMesh{reg: r, hosts: h.hosts, err: err}
}

func (h *HostMesh) String() string { return fmt.Sprintf("HostMesh%v", h.Extent()) }

// SpawnProcs starts procs on every host of the mesh: one per point of
// perHost, each a new OS process running this program in worker mode. The
// ProcMesh's extent is the host mesh's dimensions followed by perHost's.
// It waits (at most the spawn timeout) until every proc serves; on failure
// it stops those that started and returns the error.
func (h *HostMesh) SpawnProcs(perHost Dims) (*ProcMesh, error) {
	if h == nil {
		return nil, fmt.Errorf("actorrt: SpawnProcs on a nil HostMesh")
	}
	if h.err != nil {
		return nil, h.err
	}
	rt, err := getRuntime()
	if err != nil {
		return nil, err
	}
	ext, err := NewExtent(append(h.Extent().Dims(), perHost...))
	if err != nil {
		return nil, fmt.Errorf("actorrt: SpawnProcs: %w", err)
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
		procs[r] = procInfo{ID: rt.newProcID(), Host: hi.Name, Agent: hi.Agent}
		waits = append(waits, procs[r].ID)
	}
	reqs := map[string]*spawnProcsReq{}
	var agents []string
	for r, p := range procs {
		req := reqs[p.Agent]
		if req == nil {
			req = &spawnProcsReq{}
			reqs[p.Agent] = req
			agents = append(agents, p.Agent)
			waits = append(waits, p.Agent)
		}
		req.IDs = append(req.IDs, p.ID)
		req.Ranks = append(req.Ranks, r)
		req.Env = append(req.Env, rankEnv(ext.point(r)))
	}
	// The ready port fails as soon as a new proc or an agent is gone.
	fut := newFuture[ValueMesh[procReady]](label{mesh: "SpawnProcs " + ext.String()})
	port, err := rt.ports.open(newCallPort[procReady](fut, ext), waits)
	if err != nil {
		return nil, err
	}
	defer rt.ports.close(port)
	pm := &ProcMesh{reg: wholeRegion(ext), procs: procs}
	for _, a := range agents {
		req := reqs[a]
		req.Proc, req.Port = rt.procID, port
		if err := rt.sendControl(a, opSpawnProcs, port, req); err != nil {
			pm.Stop()
			return nil, fmt.Errorf("actorrt: SpawnProcs %v: %w", ext, err)
		}
	}
	ctx, cancel := context.WithTimeout(rt.ctx, rt.opts.spawnTimeout)
	defer cancel()
	ready, err := fut.Get(ctx)
	if err != nil {
		pm.Stop()
		return nil, fmt.Errorf("actorrt: SpawnProcs %v: %w", ext, err)
	}
	for r, rd := range ready.Values() {
		procs[r].Host, procs[r].PID = rd.Host, rd.PID
	}
	rt.noteAgents(procs)
	return pm, nil
}
