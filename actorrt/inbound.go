package actorrt

import (
	"fmt"
	"os"
	"strings"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// inbound is what the delivery layer hands the runtime, one frame at a
// time and in the order it is due (delivery.Config's Route, Failed and
// Lost): frames to act on, frames whose payload could not be read, and
// messages that will never come.
type inbound struct{ *core }

// route acts on a frame, in the order it is due (the delivery layer calls
// it, one frame at a time).
func (in inbound) route(f *wire.Frame, subject string) {
	in.received[f.Kind%wire.NumKinds].Add(1)
	switch f.Kind {
	case wire.KindActor:
		in.actors.deliver(*f, subject)
	case wire.KindPort:
		// A copy, so that only this path pays for a frame on the heap
		// (route's own stays on its caller's stack).
		pf := *f
		h := in.ports.get(pf.Port)
		if h == nil {
			in.undeliverable(&pf, subject)
		} else if !h.deliver(in.core, &pf) {
			in.ports.close(pf.Port)
		}
	case wire.KindControl:
		cf := *f
		in.control(&cf, subject)
	default:
		in.drop(wire.DropKindOf, subject, fmt.Errorf("a message of kind %d", f.Kind))
	}
}

// control runs a control op, once readControl has checked it. It is
// called on the dispatcher goroutine and must not block: user code (Init)
// runs on the actors' goroutines, the host agent's work on its own.
func (in inbound) control(f *wire.Frame, subject string) {
	body, kind, err := readControl(f)
	if err != nil {
		in.drop(kind, subject, err)
		if wire.OpReplies(f.Method) && f.Port != 0 && wire.ValidID(f.ReplyTo) {
			in.sendErrorToPort(portRef{proc: f.ReplyTo, id: f.Port}, fmt.Errorf("%w: %v", ErrDecode, err))
		}
		return
	}
	reply := portRef{proc: f.ReplyTo, id: f.Port}
	if wire.OpReplies(f.Method) {
		in.health.portNamedOpen(reply.proc, reply.id)
	}
	switch f.Method {
	case wire.OpSpawn:
		req := body.(*spawnReq)
		if err := in.actors.spawn(req, reply); err != nil {
			reply.rank = req.Ranks[0]
			in.sendErrorToPort(reply, err)
		}
	case wire.OpStop:
		in.actors.stopMesh(body.(*stopReq).Mesh)
	case wire.OpRestart:
		if reply.id != 0 {
			in.health.portNamedOpen(reply.proc, reply.id)
		}
		in.actors.restart(body.(*restartReq), reply)
	case wire.OpGone:
		in.notices.Add(1)
		in.health.gone(*body.(*wire.GoneNotice), false)
	case wire.OpReplaced:
		in.procs.learn(*body.(*wire.ReplacedNotice))
	case wire.OpPortGone:
		in.health.portClosed(f.ReplyTo, body.(*wire.PortGone).ID)
	case wire.OpSpawnProcs:
		go in.agent.SpawnProcs(*body.(*wire.SpawnProcsReq))
	case wire.OpRespawnProc:
		go in.agent.RespawnProc(*body.(*wire.RespawnProcReq))
	case wire.OpStopProcs:
		in.agent.StopProcs(*body.(*wire.StopProcsReq), f.ReplyTo, f.Port)
	case wire.OpSyncLogs:
		in.agent.SyncLogs(*body.(*wire.StopProcsReq), f.ReplyTo, f.Port)
	case wire.OpSignalProcs:
		in.agent.SignalProcs(*body.(*wire.StopProcsReq), f.ReplyTo, f.Port)
	case wire.OpEnded:
		in.agent.Ended(*body.(*wire.EndedReq), f.ReplyTo, f.Port)
	case wire.OpAlive:
		in.agent.Alive(f.ReplyTo)
	case wire.OpSlotTaken:
		in.agent.SlotTaken(f.ReplyTo)
	case wire.OpTakeSlot:
		in.takeSlot(body.(*wire.TakeSlotReq), f.ReplyTo, subject)
	case wire.OpFreePort:
		in.agent.FreePort(f.ReplyTo, f.Port)
	case wire.OpExec:
		in.agent.Exec(*body.(*wire.ExecReq), f.ReplyTo, f.Port)
	case wire.OpExecStop:
		in.agent.ExecStop(*body.(*wire.ExecStopReq), f.ReplyTo)
	case wire.OpFailure:
		in.sup.memberFailed(body.(*MeshFailure), "")
	case wire.OpNameAdd, wire.OpNameFree, wire.OpLookup, wire.OpGetOrSpawn:
		// The client's registry answers; a proc's drops it, and says so
		// to a sender that waits.
		in.role.registry().serve(f.Method, body, reply, subject)
	case wire.OpMeshInfo:
		req := body.(*meshInfoReq)
		answer := func() {
			if info, ok := in.sup.meshInfo(req.Mesh); ok {
				in.sendToPort(reply, 0, func(e *msgpack.Encoder) error { return e.Encode(info) })
			} else {
				in.sendErrorToPort(reply, fmt.Errorf("%w: mesh %.40q is not owned by proc %s", ErrStopped, req.Mesh, in.procID))
			}
		}
		if ref := in.sup.ref(req.Mesh); req.Settled && ref != nil {
			// Once its restarts are decided: not on the dispatcher.
			go func() {
				in.sup.awaitSettled(in.ctx, ref)
				answer()
			}()
		} else {
			answer()
		}
	}
	// (OpAgentsHello is for the launcher's standalone agents.)
}

// failed takes a frame whose payload, sent out of band, could not
// be read: whoever waits for an answer to it gets err; it is counted as
// a dropped payload.
func (in inbound) failed(f *wire.Frame, subject string, err error) {
	in.drop(wire.DropPayload, subject, err)
	switch {
	case f.Kind == wire.KindActor:
		in.actors.deliverOr(*f, subject, err)
	case f.Kind == wire.KindPort:
		we := toWireError(err)
		body, merr := msgpack.Marshal(&we)
		if merr == nil {
			pf := *f
			pf.Flags |= wire.FlagError
			pf.Payload = body
			in.route(&pf, subject)
		}
	case f.Kind == wire.KindControl && wire.OpReplies(f.Method) && f.Port != 0 && wire.ValidID(f.ReplyTo):
		in.sendErrorToPort(portRef{proc: f.ReplyTo, id: f.Port}, err)
	}
}

// lost reports messages from proc from that cannot be delivered: never
// silently. Calls waiting on that proc fail; the actors the messages may
// have been for (a mesh's members here, for a mesh's subject; else every
// actor here) fail, and their owners hear why.
func (in inbound) lost(from, key, why string) {
	err := fmt.Errorf("%w: proc %s lost messages from proc %s: %s", ErrBus, in.procID, from, why)
	in.log.Error().Err(err).Msg("messages lost")
	in.ports.failWaiting(from, err)
	if mesh, ok := jobenv.MeshOfKey(key); ok {
		in.actors.failMesh(mesh, err.Error())
		return
	}
	in.actors.failAll(err.Error())
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
