package actorrt

import (
	"errors"
	"fmt"
)

// Control messages are read in two steps: readControl decodes the body of
// an op and checks every id in it, with no effect on the runtime; then the
// dispatcher acts on what it returned (procState.control). A message that
// fails the first step is dropped before it can touch anything: a spawn
// request for a mesh with no id, a failure report that names no actor, a
// notice that "" is gone.

// readControl decodes and checks the body of a control frame. It returns
// the body (nil for the ops that have none) or the kind of drop and why.
func readControl(f *frame) (any, dropKind, error) {
	var body any
	switch f.h.method {
	case opSpawn:
		body = &spawnReq{}
	case opStop:
		body = &stopReq{}
	case opGone:
		body = &goneNotice{}
	case opPortGone:
		body = &portGone{}
	case opSpawnProcs:
		body = &spawnProcsReq{}
	case opStopProcs, opSyncLogs:
		body = &stopProcsReq{}
	case opFailure:
		body = &MeshFailure{}
	case opAgentsHello, opHeartbeat:
	default:
		return nil, dropOp, fmt.Errorf("unknown control op %.40q", f.h.method)
	}
	if body != nil {
		if err := decodeBody(f, body); err != nil {
			return nil, dropBody, fmt.Errorf("%s: body: %v", f.h.method, err)
		}
	}
	if err := checkControl(&f.h, body); err != nil {
		return nil, dropIDs, fmt.Errorf("%s: %v", f.h.method, err)
	}
	return body, 0, nil
}

// controlReplies reports whether op answers on the header's port: a
// refused request is answered with the refusal, so its sender does not
// wait for nothing.
func controlReplies(op string) bool {
	switch op {
	case opSpawn, opSpawnProcs, opStopProcs, opSyncLogs:
		return true
	}
	return false
}

// checkControl checks the ids of a decoded control message.
func checkControl(h *header, body any) error {
	if controlReplies(h.method) && (h.port == 0 || !validID(h.replyTo)) {
		return fmt.Errorf("no reply port (%.40q#%d)", h.replyTo, h.port)
	}
	switch b := body.(type) {
	case nil:
		if h.method == opHeartbeat && !validID(h.replyTo) {
			return fmt.Errorf("heartbeat from %.40q", h.replyTo)
		}
	case *spawnReq:
		return b.check()
	case *stopReq:
		if !validID(b.Mesh) {
			return fmt.Errorf("mesh id %.40q", b.Mesh)
		}
	case *goneNotice:
		if !validID(b.Proc) {
			return fmt.Errorf("proc id %.40q", b.Proc)
		}
	case *portGone:
		if b.ID == 0 || !validID(h.replyTo) {
			return fmt.Errorf("port %.40q#%d", h.replyTo, b.ID)
		}
	case *spawnProcsReq:
		if len(b.IDs) == 0 || len(b.Ranks) != len(b.IDs) || len(b.Env) != len(b.IDs) {
			return fmt.Errorf("%d ids, %d ranks, %d environments", len(b.IDs), len(b.Ranks), len(b.Env))
		}
		if err := checkIDs("proc", b.IDs); err != nil {
			return err
		}
		if !validID(b.Proc) || b.Port == 0 {
			return fmt.Errorf("ready port %.40q#%d", b.Proc, b.Port)
		}
		for _, r := range b.Ranks {
			if r < 0 {
				return fmt.Errorf("rank %d", r)
			}
		}
	case *stopProcsReq:
		if b.Rank < 0 {
			return fmt.Errorf("rank %d", b.Rank)
		}
		return checkIDs("proc", b.IDs)
	case *MeshFailure:
		// A failure report moves the supervision tree: it must say what
		// failed, where.
		if !validID(b.MeshID) || b.Mesh == "" || b.ActorID == "" || !validID(b.Proc) {
			return fmt.Errorf("failure of mesh %.40q (id %.40q), actor %.40q, proc %.40q", b.Mesh, b.MeshID, b.ActorID, b.Proc)
		}
	}
	return nil
}

func checkIDs(what string, ids []string) error {
	for _, id := range ids {
		if !validID(id) {
			return fmt.Errorf("%s id %.40q", what, id)
		}
	}
	return nil
}

// check checks a spawn request: ids, the extent against the procs it
// names, and the ranks against the extent.
func (req *spawnReq) check() error {
	switch {
	case !validID(req.Mesh) || req.Mesh == sysMesh:
		return fmt.Errorf("mesh id %.40q", req.Mesh)
	case !validName(req.Name):
		return fmt.Errorf("mesh name %.40q", req.Name)
	case req.Type == "":
		return errors.New("no actor type")
	case !validID(req.Owner):
		return fmt.Errorf("owner %.40q", req.Owner)
	case len(req.Ranks) == 0:
		return errors.New("no ranks")
	}
	if err := checkIDs("proc", req.Procs); err != nil {
		return err
	}
	// The extent's size must be the number of procs, computed so that it
	// cannot overflow.
	n := 1
	for _, d := range req.Dims {
		if d.Size < 1 || d.Size > len(req.Procs) || n*d.Size > len(req.Procs) {
			return fmt.Errorf("extent %v for %d procs", req.Dims, len(req.Procs))
		}
		n *= d.Size
	}
	if n != len(req.Procs) {
		return fmt.Errorf("extent %v for %d procs", req.Dims, len(req.Procs))
	}
	seen := make([]bool, n)
	for _, r := range req.Ranks {
		if r < 0 || r >= n || seen[r] {
			return fmt.Errorf("rank %d of %d (or given twice)", r, n)
		}
		seen[r] = true
	}
	return nil
}
