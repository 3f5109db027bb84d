package actorrt

import (
	"fmt"
	"os"
	"strings"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// WithSpares keeps n idle procs of the mesh on each of its hosts (at
// most 64): this program, started by the host's agent as the mesh's
// procs are, its runtime up and dialled in to the job's bus, with no
// rank. When a proc of the mesh ends and is replaced (WithProcRestart,
// or a mesh with a RestartPolicy that had members there), its host's
// agent hands its slot to a spare instead of starting a process: the
// spare sets the slot's variables (RANK, LOCAL_RANK, MONARCH_RANK_*,
// MASTER_*, CUDA_VISIBLE_DEVICES, WithProcEnv's) with os.Setenv before
// any actor of the slot runs on it, is bound to the slot's CPUs
// (WithProcBind) by the agent, and is the slot's proc from then on: every
// mesh and ProcMesh follows it as they follow a proc started in the
// place of one. The agent then starts another spare in the background.
// With no spare up (all taken, or still starting), a proc is started as
// without spares.
//
// Spares are procs of the job: they stop with their mesh (once no proc
// of it is left on the host) and with the job, a spare that dies is
// replaced in the pool (after 3 in a row that die before they are up, no
// more are started), and their lines carry the mesh's name marked
// "spare". They are not ranks: the job's counts leave them out until one
// takes a slot. Code a spare runs before it takes a slot (package
// initialisation, main up to Main) sees no rank variables. Not with
// WithCommand or WithWrapper (a command or a wrapper cannot take its
// rank late); an in-process cluster (actortest) keeps none.
func WithSpares(n int) ProcOption {
	return func(o *procOptions) error {
		if n < 0 || n > wire.MaxSpares {
			return fmt.Errorf("WithSpares(%d): want 0 to %d", n, wire.MaxSpares)
		}
		o.spares = n
		return nil
	}
}

// takeSlot makes this proc, a spare, the proc of the slot its agent
// hands it: it sets the slot's variables, tells its agent, and reports
// ready to whoever asked for the slot, naming itself. Only once, and
// only from the agent that started it.
func (in inbound) takeSlot(req *wire.TakeSlotReq, from, subject string) {
	if from != in.startedBy || !in.spare.CompareAndSwap(true, false) {
		in.drop(wire.DropIDs, subject, fmt.Errorf("%s from %.40q to proc %s, which is no spare of it waiting for a slot", wire.OpTakeSlot, from, in.procID))
		return
	}
	for _, kv := range req.Env {
		name, value, _ := strings.Cut(kv, "=")
		if err := os.Setenv(name, value); err != nil {
			in.sendErrorToPort(portRef{proc: req.Proc, id: req.Port}, fmt.Errorf("%w: spare %s: set %s: %v", wire.ErrProcFailed, in.procID, name, err))
			in.cancel() // it cannot be the slot's proc: it leaves
			return
		}
	}
	in.sendControl(in.startedBy, wire.OpSlotTaken, 0, nil)
	ready := wire.ProcReady{PID: os.Getpid(), Host: in.hostname, Proc: in.procID}
	in.sendToPort(portRef{proc: req.Proc, id: req.Port}, 0, func(e *msgpack.Encoder) error { return e.Encode(&ready) })
	in.publish(in.subjects.Up(), []byte(in.procID+" "+in.hostLabel))
}
