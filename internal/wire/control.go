package wire

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Control ops: the Method of a KindControl frame, each with the body its
// payload holds. The bodies of the actor ops (spawn, stop, failure) are
// the SDK's; those a host agent reads or writes are here.
const (
	// OpSpawn (the SDK's spawn request): create members of a mesh on the
	// receiving proc.
	OpSpawn = "spawn"
	// OpStop (the SDK's stop request): stop the receiving proc's members
	// of a mesh.
	OpStop = "stop"
	// OpGone (GoneNotice), on the job's deaths subject: a proc ended.
	OpGone = "gone"
	// OpPortGone (PortGone): a port the receiver sent to is closed.
	OpPortGone = "portgone"
	// OpHeartbeat (no body), on an agent's heartbeat subject, from the
	// agent named by ReplyTo.
	OpHeartbeat = "hb"
	// OpAgentsHello (no body), on the job's agents subject: the client
	// asks the host agents to report.
	OpAgentsHello = "hello"
	// OpFailure (the SDK's MeshFailure): a member of a mesh owned by the
	// receiver failed.
	OpFailure = "failure"
	// OpMeshInfo (the SDK's mesh-info request): the owner of a mesh
	// answers with where its members are.
	OpMeshInfo = "meshinfo"
	// OpSpawnProcs (SpawnProcsReq): a host agent starts procs.
	OpSpawnProcs = "spawnprocs"
	// OpStopProcs (StopProcsReq): a host agent stops some of its procs,
	// and answers once they are gone.
	OpStopProcs = "stopprocs"
	// OpSyncLogs (StopProcsReq): a host agent answers once every line the
	// procs wrote so far has been sent.
	OpSyncLogs = "synclogs"
	// OpAlive (no body), from a proc to the host agent that started it
	// (ReplyTo names the proc): it is alive. A proc that stops beating
	// (stopped, or its runtime wedged) is killed and reported.
	OpAlive = "alive"
	// OpEnded (EndedReq): a host agent answers (EndedReply) which of the
	// given procs of its host have ended. A process that starts holding
	// procs of an agent subscribes to the agent's deaths subject, then
	// asks: between them it misses no end.
	OpEnded = "ended"
	// OpFreePort (no body): a host agent answers (FreePort) with a TCP
	// port free on its host, which it hands out once, and the address its
	// host is reached at: the MASTER_PORT and MASTER_ADDR of a new proc
	// mesh whose rank 0 is there.
	OpFreePort = "freeport"
	// OpSignalProcs (StopProcsReq with a Signal): a host agent sends the
	// signal to those of the given procs that catch it, and answers with
	// how many it sent it to (an int): a notice to an SPMD job's ranks,
	// which the signal's default action would end.
	OpSignalProcs = "signalprocs"
	// OpRestart (the SDK's restart request): restart members of a mesh
	// in place on the receiving proc, answering for each on the port, if
	// any; or give up on them.
	OpRestart = "restart"
	// OpRespawnProc (RespawnProcReq): a host agent starts proc New in the place of
	// proc Old, one it started that has ended, as Old was started: the same
	// program and arguments (or command), environment, wrapper, CPU binding,
	// rank and proc mesh name; only its id (and where it reports ready) differ.
	// New reports ready (ProcReady) to Proc#Port with rank 0, as a spawned proc
	// does; an agent that cannot start it answers there with an error for rank 0.
	OpRespawnProc = "respawnproc"
	// OpTakeSlot (TakeSlotReq), from a host agent to one of its spares (a
	// proc started idle, SpawnProcsReq.Spares): it takes the slot of an
	// ended proc, setting the slot's variables, and reports ready
	// (ProcReady naming itself) to Proc#Port; then it tells its agent
	// (OpSlotTaken).
	OpTakeSlot = "takeslot"
	// OpSlotTaken (no body), from a spare to its agent (ReplyTo names the
	// spare): it has taken the slot it was handed, its variables set.
	OpSlotTaken = "slottaken"
	// OpReplaced (ReplacedNotice), on the deaths subject of the host
	// agent of both procs: a proc was started in an ended one's place, by
	// the process that asked for it. Every holder of the agent's procs
	// hears it, so its ProcMesh values reach the slot's new proc.
	OpReplaced = "replaced"
)

// The ops of the job's name registry, which the client keeps (the SDK's
// bodies): a proc registers each mesh it spawns, frees the name of each
// mesh it stops, and asks the client to look a name up or to spawn a
// singleton at its first use.
const (
	// OpNameAdd: the mesh a proc spawned takes its name; the client
	// answers once it is registered.
	OpNameAdd = "nameadd"
	// OpNameFree (no answer): a mesh was stopped; its name is free.
	OpNameFree = "namefree"
	// OpLookup: the client answers with the mesh of a name.
	OpLookup = "lookup"
	// OpGetOrSpawn: the client answers with the mesh of a name, which it
	// spawns at the name's first use.
	OpGetOrSpawn = "getorspawn"
)

// FreePort is a host agent's answer to OpFreePort.
type FreePort struct {
	Addr string `msgpack:"addr"`
	Port int    `msgpack:"port"`
}

// EndedReq asks a host agent which of these procs have ended.
type EndedReq struct {
	IDs []string `msgpack:"ids"`
}

// EndedReply is a host agent's answer to EndedReq: the notices of those
// that have, and the ids it does not know: neither a proc it started nor
// one its process knows to be in the job (the delivery layer asks so who
// vouches for a sender).
type EndedReply struct {
	Gone    []GoneNotice `msgpack:"gone"`
	Unknown []string     `msgpack:"unknown,omitempty"`
}

// SpawnProcsReq asks an agent to start procs. Each new proc reports ready
// (ProcReady) to the port Proc#Port with its rank.
//
// With Command, each proc runs that command instead of the job's program:
// it is not an SDK proc (it does not dial the bus and is not given the
// job's secret), and the agent reports it ready as soon as it has
// started. Wrap, per proc (nil or as long as IDs), is a command line the
// proc's own runs under (numactl, taskset); CPUs, per proc, the CPUs it
// may run on (none: any).
type SpawnProcsReq struct {
	IDs     []string   `msgpack:"ids"`
	Ranks   []int      `msgpack:"ranks"` // rank of each in the new proc mesh
	Env     [][]string `msgpack:"env"`   // extra environment of each (its place in the mesh)
	Proc    string     `msgpack:"proc"`  // the ready port's proc
	Port    uint64     `msgpack:"port"`
	Command []string   `msgpack:"command,omitempty"`
	Wrap    [][]string `msgpack:"wrap,omitempty"`
	CPUs    [][]int    `msgpack:"cpus,omitempty"`
	// Mesh is the new proc mesh's name, which the procs' lines carry.
	Mesh string `msgpack:"mesh,omitempty"`
	// Spares is how many idle procs of this mesh the agent keeps (at most
	// MaxSpares): the same program and arguments, no rank; a respawn of
	// one of the mesh's procs hands its slot to one (OpTakeSlot). SDK
	// procs only: not with Command or Wrap.
	Spares int `msgpack:"spares,omitempty"`
}

// MaxSpares bounds SpawnProcsReq.Spares: the idle procs an agent keeps
// for one mesh.
const MaxSpares = 64

// TakeSlotReq hands a spare the slot of an ended proc (OpTakeSlot): Env,
// the slot's own variables ("NAME=value": its rank, torchrun's, the
// user's), which the spare sets before it reports ready (ProcReady with
// Proc naming itself) to Proc#Port with rank 0.
type TakeSlotReq struct {
	Env  []string `msgpack:"env"`
	Proc string   `msgpack:"proc"` // the ready port's proc
	Port uint64   `msgpack:"port"`
}

// MaxSlotVars bounds TakeSlotReq.Env.
const MaxSlotVars = 4096

// checkSlotEnv checks a slot's variables: at most MaxSlotVars, each
// NAME=value (CheckEnvVar).
func checkSlotEnv(env []string) error {
	if len(env) > MaxSlotVars {
		return fmt.Errorf("%d variables (at most %d)", len(env), MaxSlotVars)
	}
	for _, kv := range env {
		if err := CheckEnvVar(kv); err != nil {
			return err
		}
	}
	return nil
}

// CheckEnvVar checks kv is NAME=value with a name a process environment
// can hold (not empty, no '=' or NUL) and no NUL in the value.
func CheckEnvVar(kv string) error {
	name, _, ok := strings.Cut(kv, "=")
	if !ok || name == "" || strings.ContainsRune(kv, 0) {
		return fmt.Errorf("environment variable %.60q (want NAME=value, no NUL)", kv)
	}
	return nil
}

// RespawnProcReq asks a host agent to start proc New in the place of its
// ended proc Old (OpRespawnProc). New reports ready (ProcReady) to the
// port Proc#Port with rank 0; a refusal, or a failure to start it, is an
// error there for rank 0.
type RespawnProcReq struct {
	Old  string `msgpack:"old"`
	New  string `msgpack:"new"`
	Proc string `msgpack:"proc"` // the ready port's proc
	Port uint64 `msgpack:"port"`
	// Adopt, set when Old was a proc of another host, lost: the agent
	// hands Old's slot, as Adopt describes it, to an idle spare of the
	// mesh it names (SpawnProcsReq.Spares), or refuses; it starts
	// nothing.
	Adopt *AdoptSlot `msgpack:"adopt,omitempty"`
}

// AdoptSlot is the slot of a proc of a lost host, for a spare of its
// mesh on another (RespawnProcReq.Adopt): the mesh's name, the slot's
// rank, its own variables and CPU binding (none: any).
type AdoptSlot struct {
	Mesh string   `msgpack:"mesh"`
	Rank int      `msgpack:"rank"`
	Env  []string `msgpack:"env"`
	CPUs []int    `msgpack:"cpus,omitempty"`
}

func (s *AdoptSlot) check() error {
	if s.Mesh == "" || len(s.Mesh) > MaxMeshName || s.Rank < 0 {
		return fmt.Errorf("slot %d of mesh %.40q", s.Rank, s.Mesh)
	}
	if err := checkSlotEnv(s.Env); err != nil {
		return err
	}
	for _, c := range s.CPUs {
		if c < 0 || c >= MaxCPU {
			return fmt.Errorf("cpu %d (0..%d)", c, MaxCPU-1)
		}
	}
	return nil
}

// ReplacedNotice tells that proc New, which host agent Agent started on
// host Host (pid PID), took the place of Old, a proc of the same agent
// that ended (OpReplaced).
type ReplacedNotice struct {
	Old   string `msgpack:"old"`
	New   string `msgpack:"new"`
	Agent string `msgpack:"agent"`
	Host  string `msgpack:"host"`
	PID   int    `msgpack:"pid"`
}

// MaxCPU bounds a CPU number in SpawnProcsReq.CPUs (the kernel's own
// limit on this architecture's cpu sets is far above any machine's).
const MaxCPU = 1 << 16

// StopProcsReq asks an agent to stop some of its procs (OpStopProcs), or
// to send their output so far (OpSyncLogs).
type StopProcsReq struct {
	IDs  []string `msgpack:"ids"`
	Rank int      `msgpack:"rank"` // the rank of the reply, once done
	// GraceMS, for a stop, is the time between each proc's SIGTERM and
	// its SIGKILL, in milliseconds (at most MaxStopGrace); 0: the
	// agent's stop timeout.
	GraceMS int64 `msgpack:"grace,omitempty"`
	// Signal, for OpSignalProcs, is the signal's number (one of
	// NoticeSignals).
	Signal int `msgpack:"signal,omitempty"`
}

// NoticeSignals are the signals OpSignalProcs may send: those a program
// catches to hear that its job is ending (USR1, USR2, TERM, INT, HUP).
var NoticeSignals = []int{10, 12, 15, 2, 1}

// MaxMeshName bounds SpawnProcsReq.Mesh.
const MaxMeshName = 64

// MaxStopGrace bounds StopProcsReq.GraceMS.
const MaxStopGrace = time.Hour

// GoneNotice is published on the deaths subject when a proc ends.
type GoneNotice struct {
	Proc    string `msgpack:"proc"`
	Reason  string `msgpack:"reason"`
	Stopped bool   `msgpack:"stopped"` // ended on request (a stop), not a failure
	// Status is the proc's exit status as a shell reports it (128+n for
	// signal n); -1 when the agent could not tell (a host lost).
	Status int `msgpack:"status"`
	// At is when the proc ended, by its host's clock, in Unix
	// nanoseconds: what orders ends heard from different hosts (an SPMD
	// job's first failure). 0 when nobody saw it end (a host lost).
	At int64 `msgpack:"at,omitempty"`
	// ErrAt is when its host's agent read the last line it wrote to
	// stderr before it ended (at most At), in Unix nanoseconds: the time
	// of its error, for a program whose last words are its error (a
	// Python traceback). 0 when it wrote none, or nobody knows.
	ErrAt int64 `msgpack:"errat,omitempty"`
}

// PortGone tells a sender that a port it sent to is closed.
type PortGone struct {
	ID uint64 `msgpack:"id"`
}

// ProcReady is what a new proc (or a host agent, asked by OpAgentsHello)
// reports to its spawner once it serves.
type ProcReady struct {
	PID  int    `msgpack:"pid"`
	Host string `msgpack:"host"`
	// Proc is set when a respawn found the ended proc replaced already:
	// the proc in its place, which runs (OpRespawnProc).
	Proc string `msgpack:"proc,omitempty"`
}

// OpReplies reports whether op answers on the header's port: a refused
// request is answered with the refusal, so its sender does not wait for
// nothing.
func OpReplies(op string) bool {
	switch op {
	case OpSpawn, OpSpawnProcs, OpRespawnProc, OpStopProcs, OpSyncLogs, OpEnded, OpMeshInfo, OpFreePort, OpSignalProcs, OpExec:
		return true
	case OpNameAdd, OpLookup, OpGetOrSpawn:
		return true
	}
	return false
}

// CheckControl checks the ids of a decoded control message whose body is
// nil or one of this package's: a message that fails is dropped before it
// acts. For a body of another type only the header is checked; the rest
// is the caller's.
func CheckControl(h *Header, body any) error {
	if OpReplies(h.Method) && (h.Port == 0 || !ValidID(h.ReplyTo)) {
		return fmt.Errorf("no reply port (%.40q#%d)", h.ReplyTo, h.Port)
	}
	switch b := body.(type) {
	case nil:
		if (h.Method == OpHeartbeat || h.Method == OpAlive || h.Method == OpSlotTaken) && !ValidID(h.ReplyTo) {
			return fmt.Errorf("%s from %.40q", h.Method, h.ReplyTo)
		}
	case *GoneNotice:
		if !ValidID(b.Proc) {
			return fmt.Errorf("proc id %.40q", b.Proc)
		}
		if b.At < 0 {
			return fmt.Errorf("proc %.40q ended at %d (want Unix nanoseconds, or 0)", b.Proc, b.At)
		}
		if b.ErrAt < 0 || b.At != 0 && b.ErrAt > b.At {
			return fmt.Errorf("proc %.40q wrote its last error at %d, ended at %d (want Unix nanoseconds, at most its end, or 0)", b.Proc, b.ErrAt, b.At)
		}
	case *ReplacedNotice:
		if !ValidID(b.Old) || !ValidID(b.New) || b.Old == b.New || !ValidID(b.Agent) || b.PID < 0 {
			return fmt.Errorf("proc %.40q replaced by %.40q of agent %.40q, pid %d", b.Old, b.New, b.Agent, b.PID)
		}
	case *PortGone:
		if b.ID == 0 || !ValidID(h.ReplyTo) {
			return fmt.Errorf("port %.40q#%d", h.ReplyTo, b.ID)
		}
	case *SpawnProcsReq:
		if len(b.IDs) == 0 || len(b.Ranks) != len(b.IDs) || len(b.Env) != len(b.IDs) {
			return fmt.Errorf("%d ids, %d ranks, %d environments", len(b.IDs), len(b.Ranks), len(b.Env))
		}
		if err := CheckIDs("proc", b.IDs); err != nil {
			return err
		}
		if !ValidID(b.Proc) || b.Port == 0 {
			return fmt.Errorf("ready port %.40q#%d", b.Proc, b.Port)
		}
		for _, r := range b.Ranks {
			if r < 0 {
				return fmt.Errorf("rank %d", r)
			}
		}
		if len(b.Mesh) > MaxMeshName {
			return fmt.Errorf("mesh name of %d bytes (at most %d)", len(b.Mesh), MaxMeshName)
		}
		if b.Command != nil && (len(b.Command) == 0 || b.Command[0] == "") {
			return fmt.Errorf("empty command")
		}
		if b.Spares < 0 || b.Spares > MaxSpares {
			return fmt.Errorf("%d spares (0..%d)", b.Spares, MaxSpares)
		}
		if b.Spares > 0 && (b.Command != nil || b.Wrap != nil) {
			return fmt.Errorf("spares of a command or wrapped procs (they cannot take a rank late)")
		}
		if b.Wrap != nil && len(b.Wrap) != len(b.IDs) || b.CPUs != nil && len(b.CPUs) != len(b.IDs) {
			return fmt.Errorf("%d ids, %d wrappers, %d cpu sets", len(b.IDs), len(b.Wrap), len(b.CPUs))
		}
		for _, cpus := range b.CPUs {
			for _, c := range cpus {
				if c < 0 || c >= MaxCPU {
					return fmt.Errorf("cpu %d (0..%d)", c, MaxCPU-1)
				}
			}
		}
	case *TakeSlotReq:
		if !ValidID(b.Proc) || b.Port == 0 {
			return fmt.Errorf("ready port %.40q#%d", b.Proc, b.Port)
		}
		return checkSlotEnv(b.Env)
	case *RespawnProcReq:
		if !ValidID(b.Old) || !ValidID(b.New) {
			return fmt.Errorf("respawn of proc %.40q as %.40q", b.Old, b.New)
		}
		if !ValidID(b.Proc) || b.Port == 0 {
			return fmt.Errorf("ready port %.40q#%d", b.Proc, b.Port)
		}
		if b.Adopt != nil {
			return b.Adopt.check()
		}
	case *StopProcsReq:
		if b.Rank < 0 || b.GraceMS < 0 || b.GraceMS > MaxStopGrace.Milliseconds() {
			return fmt.Errorf("rank %d, grace %dms (at most %v)", b.Rank, b.GraceMS, MaxStopGrace)
		}
		if (h.Method == OpSignalProcs) != slices.Contains(NoticeSignals, b.Signal) {
			return fmt.Errorf("%s with signal %d", h.Method, b.Signal)
		}
		return CheckIDs("proc", b.IDs)
	case *EndedReq:
		return CheckIDs("proc", b.IDs)
	case *ExecReq:
		return b.check()
	case *ExecStopReq:
		return b.check()
	}
	return nil
}

// AgentsPort is the port of the client that every host agent a launcher
// started reports to (ProcReady, at its host's rank): a fixed number,
// since the agents start before the client runs. Ports the client opens
// count up from 1 and never reach it.
const AgentsPort uint64 = 1 << 62

// ReadAgentControl decodes and checks a control frame addressed to a
// standalone host agent: its own ops (OpSpawnProcs, OpStopProcs,
// OpSyncLogs, OpSignalProcs, OpEnded, OpExec, OpExecStop, whose body it
// returns), OpAgentsHello and OpAlive
// (nil body). A frame
// that fails gives the kind of drop and why.
func ReadAgentControl(f *Frame) (any, DropKind, error) {
	var body any
	switch f.Method {
	case OpSpawnProcs:
		body = &SpawnProcsReq{}
	case OpRespawnProc:
		body = &RespawnProcReq{}
	case OpStopProcs, OpSyncLogs, OpSignalProcs:
		body = &StopProcsReq{}
	case OpEnded:
		body = &EndedReq{}
	case OpExec:
		body = &ExecReq{}
	case OpExecStop:
		body = &ExecStopReq{}
	case OpAgentsHello, OpAlive, OpFreePort, OpSlotTaken:
	default:
		return nil, DropOp, fmt.Errorf("op %.40q is not a host agent's", f.Method)
	}
	if body != nil {
		if err := DecodePayload(f.Payload, []reflect.Type{reflect.TypeOf(body)}, func(d *msgpack.Decoder) error { return d.Decode(body) }); err != nil {
			return nil, DropBody, fmt.Errorf("%s: body: %v", f.Method, err)
		}
	}
	if err := CheckControl(&f.Header, body); err != nil {
		return nil, DropIDs, fmt.Errorf("%s: %v", f.Method, err)
	}
	return body, 0, nil
}
