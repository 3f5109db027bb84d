package actorrt

import (
	"errors"
	"fmt"

	"github.com/monarch-go/monarch/internal/wire"
)

// Control messages are read in two steps: readControl decodes the body of
// an op and checks every id in it, with no effect on the runtime; then the
// dispatcher acts on what it returned (procState.control). A message that
// fails the first step is dropped before it can touch anything: a spawn
// request for a mesh with no id, a failure report that names no actor, a
// notice that "" is gone.

// readControl decodes and checks the body of a control frame. It returns
// the body (nil for the ops that have none) or the kind of drop and why.
func readControl(f *wire.Frame) (any, wire.DropKind, error) {
	var body any
	switch f.Method {
	case wire.OpSpawn:
		body = &spawnReq{}
	case wire.OpStop:
		body = &stopReq{}
	case wire.OpGone:
		body = &wire.GoneNotice{}
	case wire.OpReplaced:
		body = &wire.ReplacedNotice{}
	case wire.OpPortGone:
		body = &wire.PortGone{}
	case wire.OpSpawnProcs:
		body = &wire.SpawnProcsReq{}
	case wire.OpRespawnProc:
		body = &wire.RespawnProcReq{}
	case wire.OpTakeSlot:
		body = &wire.TakeSlotReq{}
	case wire.OpStopProcs, wire.OpSyncLogs, wire.OpSignalProcs:
		body = &wire.StopProcsReq{}
	case wire.OpEnded:
		body = &wire.EndedReq{}
	case wire.OpExec:
		body = &wire.ExecReq{}
	case wire.OpExecStop:
		body = &wire.ExecStopReq{}
	case wire.OpFailure:
		body = &MeshFailure{}
	case wire.OpMeshInfo:
		body = &meshInfoReq{}
	case wire.OpRestart:
		body = &restartReq{}
	case wire.OpAgentsHello, wire.OpHeartbeat, wire.OpAlive, wire.OpFreePort, wire.OpSlotTaken:
	default:
		if body = nameBody(f.Method); body == nil {
			return nil, wire.DropOp, fmt.Errorf("unknown control op %.40q", f.Method)
		}
	}
	if body != nil {
		if err := decodeBody(f, body); err != nil {
			return nil, wire.DropBody, fmt.Errorf("%s: body: %v", f.Method, err)
		}
	}
	if err := checkControl(&f.Header, body); err != nil {
		return nil, wire.DropIDs, fmt.Errorf("%s: %v", f.Method, err)
	}
	return body, 0, nil
}

// checkControl checks the ids of a decoded control message: the header
// and the host agent's bodies as wire checks them, then the actor ops'
// bodies.
func checkControl(h *wire.Header, body any) error {
	if err := wire.CheckControl(h, body); err != nil {
		return err
	}
	switch b := body.(type) {
	case *spawnReq:
		return b.check()
	case *restartReq:
		return b.check()
	case *stopReq:
		if !wire.ValidID(b.Mesh) {
			return fmt.Errorf("mesh id %.40q", b.Mesh)
		}
	case *meshInfoReq:
		if !wire.ValidID(b.Mesh) {
			return fmt.Errorf("mesh id %.40q", b.Mesh)
		}
	case interface{ check() error }: // the registry's requests (names.go)
		return b.check()
	case *MeshFailure:
		// A failure report moves the supervision tree: it must say what
		// failed, where.
		if !wire.ValidID(b.MeshID) || b.Mesh == "" || b.ActorID == "" || !wire.ValidID(b.Proc) {
			return fmt.Errorf("failure of mesh %.40q (id %.40q), actor %.40q, proc %.40q", b.Mesh, b.MeshID, b.ActorID, b.Proc)
		}
	}
	return nil
}

// maxMembers bounds the extent a spawn request may name: far more actors
// than any job has, small enough that a rank always fits an int32.
const maxMembers = 1 << 30

// check checks a spawn request: ids, the extent, and the ranks against
// the extent.
func (req *spawnReq) check() error {
	switch {
	case !wire.ValidID(req.Mesh) || isSystemMesh(req.Mesh):
		return fmt.Errorf("mesh id %.40q", req.Mesh)
	case !validName(req.Name):
		return fmt.Errorf("mesh name %.40q", req.Name)
	case req.Type == "":
		return errors.New("no actor type")
	case !wire.ValidID(req.Owner):
		return fmt.Errorf("owner %.40q", req.Owner)
	case len(req.Ranks) == 0:
		return errors.New("no ranks")
	}
	// The extent's size, computed so that it cannot overflow.
	n := 1
	for _, d := range req.Dims {
		if d.Size < 1 || d.Size > maxMembers || n > maxMembers/d.Size {
			return fmt.Errorf("extent %v (at most %d members)", req.Dims, maxMembers)
		}
		n *= d.Size
	}
	if len(req.Ranks) > n {
		return fmt.Errorf("%d ranks for an extent of %d", len(req.Ranks), n)
	}
	seen := make(map[int]bool, len(req.Ranks))
	for _, r := range req.Ranks {
		if r < 0 || r >= n || seen[r] {
			return fmt.Errorf("rank %d of %d (or given twice)", r, n)
		}
		seen[r] = true
	}
	return nil
}
