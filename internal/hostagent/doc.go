// Package hostagent is a job's host agent: on one host, it starts the
// job's program in worker mode for every proc asked of it, captures each
// proc's stdout and stderr line by line onto the job's log subject,
// watches the procs and tells the job when one ends (how, and when by
// this host's clock: the moment it was reaped, before its last output is
// drained, and when the last line it wrote to stderr was read, at most
// that moment), and stops them on request.
//
// An agent is addressed like a proc, by its id, with control messages on
// its proc subject (internal/wire): spawnprocs, respawnproc, stopprocs,
// synclogs, signalprocs, ended, alive, slottaken and freeport, each served by the
// Agent method of that name (SpawnProcs, RespawnProc, StopProcs, ...).
// Each new proc reports ready straight to whoever asked; an agent answers
// a stop, a signal or a log sync once it is done. It also runs the
// commands of `monarch exec` (exec, execstop: exec.go), which are not
// procs: their output goes to whoever asked, not to the job's log.
//
// # Two ways to run
//
//   - Embedded (New): every process of a job that hosts actors (the
//     client and every proc) has an agent for its own host, so that
//     ThisHost(ctx).SpawnProcs works anywhere. Its process's runtime reads
//     the control messages addressed to it (wire's checks) and calls the
//     Agent's method for each, and hears of every child that ends
//     (Config.OnEnd).
//   - Standalone (Run): `monarch agent`, started by a launcher on each
//     host (an srun step, an ssh session, a local process). It first
//     holds its link to the launcher's link watcher (internal/hostlink:
//     what confirms, or not, a silence of its heartbeats), where it is
//     admitted (admit.go: over TLS when the bus is; the token, if it
//     came without, and its host's certificate from the job's CA), then
//     opens its procs' variables, sealed under the token
//     (jobenv.OpenEnv: the job's [env] is on no command line), runs its
//     host's bus and connects to it, reports to the client,
//     heartbeats every [health] heartbeat, announces the ends of its
//     procs to the job, and exits when the job is gone: its host's link
//     to the hub down for LinkGrace, SIGTERM
//     (srun's teardown), or EOF on its stdin (the ssh session closed),
//     taking its procs along.
//
// # The host's bus
//
// Every host runs a NATS server of its own (StartHostBus, hostbus.go): a
// leaf node of the job's hub, which the host's agent and procs dial over
// loopback, so that a message for many procs of a host crosses the
// host's link once. A simulated host started as a proc (HostsFromConfig
// without a launcher) runs one too. With [bus] hubs = K the first K-1
// hosts run servers of the hub instead, joined by routes to the
// launcher's, and the leaves spread over the K servers.
//
// # Processes
//
// The job's program (Config.Program) is opened once, at the first proc
// (a standalone agent whose launcher sent the program: as it starts), and
// checked (bincache.OpenProgram): it and every folder above it belong to
// the user or root and no one else may write them, and with
// Config.ProgramSum its sha256 is the one the launcher sent (hashed, or,
// for a copy in a binary cache, as its stamp vouches). A program
// that fails is refused, for every proc asked of it, with an error that
// says which file or folder and why. Every proc, respawns included, runs
// from that descriptor (its file 3, /proc/self/fd/3, which a wrapper runs
// as well): a program swapped at its path later is not what runs.
// Commands (SpawnProcsReq.Command, an SPMD job's) are the host's own,
// found in PATH.
//
// An agent with a Starter (Config.Starter, starter.go) hands it its SDK
// procs to start instead, with the variables an executed proc would get,
// and watches the Process it returns as it watches a child: an
// in-process cluster's (actorrt/actortest) runs each as a runtime of the
// agent's own process.
//
// Children are started with internal/child: a parent-death signal from a
// thread that lives as long as the process, their own process group (a
// terminal's Ctrl-C reaches the client only, which stops them in order),
// and SIGTERM, then SIGKILL after the stop timeout, to stop them.
// Each group (a proc's, a spare's, a command's of `monarch exec`) is kept
// by the agent's keeper (child.Keeper, started at its first child): when
// the agent dies, by any death, SIGKILL included, its children die of
// their parent-death signal and the keeper sends SIGKILL to their groups,
// so that a shell's or a wrapper's children (python under bash) go too;
// at Close it ends what procs that ended left in their groups. A process
// that leaves its group (setsid, a daemon) is not ended so. A group is
// forgotten once it is empty (its id may be a new process's). An
// end is told as a stop (GoneNotice.Stopped) only when the stop came
// while the proc still ran: one that ended on its own before, its output
// still draining, failed, and is told so.
//
// # Respawns
//
// RespawnProc (respawnproc) starts a new proc in the place of one of the
// agent's that ended, as it was started: the same program and arguments
// (or command), wrapper, CPU binding, environment, rank and proc mesh
// name; only its id and where it reports ready (rank 0 of the request's
// port) differ. A proc has at most one successor, which may be respawned
// in turn: a second respawn of a proc replaced already (another mesh's
// owner asking) starts nothing and is answered, once the successor is up
// (a command started, an SDK proc beating; at most a minute), with the
// successor's ready report, naming it (ProcReady.Proc). The agent keeps
// what a respawn needs of its last 4096 ended procs (maxRespawnable), and
// of one respawned only its successor's id; a proc that ended before
// them, one still running, one whose successor ended too, or a new id the
// agent knows, is refused on the port, naming the host and the procs. A stop, log sync or signal of a proc that
// ended reaches the proc started in its place (and so on down the chain):
// whoever holds the proc mesh it was spawned in stops that one.
//
// # Spares
//
// A SpawnProcs with Spares (SpawnProcsReq.Spares, spares.go) has the
// agent keep that many idle procs of the mesh (a pool per request): the
// same program, arguments and base environment, started with
// MONARCH_SPARE=1 and no rank, parent or ready port; their runtime dials
// in and beats, and waits. A respawn of one of the mesh's procs takes an
// idle spare (one up before one still starting) instead of starting a
// process: the spare is the ended proc's successor at once, the agent
// binds it to the slot's CPUs and sends it the slot's variables and the
// asker's ready port (OpTakeSlot); the spare sets them, tells the agent
// (OpSlotTaken: a second asker is answered only then) and reports ready
// itself, naming itself (ProcReady.Proc). A spare that ends before that
// gives the slot back (the ended proc may be respawned again) and the
// asker is told. The pool is refilled after each take and each spare's
// end (after 3 in a row that end before they are up, no more are
// started), and its spares are stopped once the mesh has no proc left
// on the host (StopProcs) and with the agent. An idle spare's end is
// told to no one. An agent with a Starter keeps no spares; commands and
// wrapped procs have none (they cannot take a rank late).
//
// # Output
//
// Every line a proc writes is sent before anyone hears that it ended (a
// grandchild holding its pipes open gets OutputGrace, not forever), and a
// log sync answers once every line written so far has been sent: both
// pipes empty and both captures waiting on them.
package hostagent
