package actorrt

import (
	"context"
	"errors"
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

// WithSparesAnyHost lets the slots of a host that is lost be taken by
// the spares (WithSpares) of the mesh's other hosts: when a proc of the
// mesh is to be replaced and its host is gone, the runtime that spawned
// the mesh asks the agents of its other hosts, in turn, to hand the
// slot to an idle spare, with the slot's variables (its rank, torchrun's,
// WithProcEnv's) and CPU binding. The slot then lives on that host: its
// coordinates (and rank variables) in the mesh stay the same, while the
// ProcMesh's host for that slot, and LOCAL_RANK's meaning, are no longer
// those of its "hosts" coordinate; a host may run more procs of the mesh
// than its share. Without an idle spare on any host left, the loss goes
// to the owner as without this option. Only WithSpares.
func WithSparesAnyHost() ProcOption {
	return func(o *procOptions) error { o.sparesAnyHost = true; return nil }
}

// slotSpec is what a spare of another host needs to take a slot of a
// proc mesh (WithSparesAnyHost).
type slotSpec struct {
	mesh   string
	rank   int
	env    []string
	cpus   []int
	agents []string // the mesh's hosts' agents
}

// allowAdopt records the slots of the procs reqs started (by agent) for
// mesh name, so that a spare of another of agents may take one whose
// host is lost.
func (sp *spawner) allowAdopt(name string, reqs map[string]*wire.SpawnProcsReq, agents []string) {
	for _, req := range reqs {
		for i, id := range req.IDs {
			s := &slotSpec{mesh: name, rank: req.Ranks[i], env: req.Env[i], agents: agents}
			if req.CPUs != nil {
				s.cpus = req.CPUs[i]
			}
			sp.adoptable.Store(id, s)
		}
	}
}

// followSlot moves what the slot of proc old needs to be adopted on to
// the proc in its place.
func (sp *spawner) followSlot(old, new string) {
	if s, ok := sp.adoptable.LoadAndDelete(old); ok {
		sp.adoptable.Store(new, s)
	}
}

// adoptElsewhere asks the agents of s's other hosts, in turn, to hand
// old's slot to a spare (old's host, agent, is lost: why).
func (sp *spawner) adoptElsewhere(ctx context.Context, old, agent string, s *slotSpec, why error) (procInfo, error) {
	errs := []error{fmt.Errorf("its host is gone: %w", why)}
	for _, a := range s.agents {
		if a == agent || sp.rt.health.goneErr(a) != nil {
			continue
		}
		p, err := sp.ask(ctx, old, a, &wire.AdoptSlot{Mesh: s.mesh, Rank: s.rank, Env: s.env, CPUs: s.cpus})
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	return procInfo{}, fmt.Errorf("no spare of another host took its slot: %w", errors.Join(errs...))
}
