// Package actortest runs a whole job inside a test's process, as
// net/http/httptest runs a server: N simulated hosts, each with the procs
// SpawnProcs starts on it, over a real embedded NATS hub with a leaf
// server per host (the topology of a real job: a host's procs dial its
// leaf, the leaves link to the hub), and faults on demand.
//
//	func TestTrainer(t *testing.T) {
//		c := actortest.Start(t, 4) // 4 hosts; closed when t ends
//		ctx := c.Context()         // the client's, as Main's function's
//		procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 8}})
//		...
//		c.Kill(procs.Slice("hosts", 2, 3).Slice("gpus", 5, 6))
//		...
//	}
//
// The code under test is the code a real job runs: the client and every
// proc are the SDK's own runtimes (actorrt's client and worker), with
// their host agents, supervision, restarts, names, the delivery layer and
// the bus; only the start of a proc differs. Where a host agent would
// execute the program, it builds a proc's runtime on goroutines of this
// process, on a bus connection of its own (hostagent.Starter). The procs
// run the actor types this test binary registered (actorrt.Register, in
// an init or TestMain, as a real program does) and the options given to
// New, as Main's are given to every proc.
//
// # Faults
//
//   - Kill: a proc is cut off from the bus at once (its connection
//     closed) and its host agent tells the job of its end as of a
//     SIGKILL: supervision, restarts and calls in flight see what they
//     see of a real kill.
//   - LoseHost: a host's agent and all its procs are killed, and its leaf
//     with them; the agent that started the host tells of its end.
//   - CutHost, HealHost: a host's leaf link to the hub is cut (its
//     connections closed, new ones refused) until healed; the leaf
//     dials again meanwhile, and gives up on the job after
//     hostagent.LinkGrace.
//   - DelayHost: everything crossing a host's link, both ways, its
//     agent's heartbeats included, arrives late by d: late, or, past the
//     host timeout, lost.
//
// # What differs from real procs
//
// All runtimes share one address space: package-level variables, the
// environment (a proc's MONARCH_RANK_* and torchrun variables, and
// WithProcEnv's, are not in os.Environ: there is one for all), the
// working directory and the standard streams (a proc's output is the
// test's, not its host's log lines). No signal reaches a proc: SIGTERM
// and SIGKILL are simulated (ProcMesh.Notify reaches none), and a proc
// has no pid of its own, no CPU binding, no wrapper (WithWrapper,
// WithProcBind are ignored); commands (WithCommand) are still executed.
// An actor that calls os.Exit, or panics in a goroutine of its own, ends
// the whole test. A killed proc's goroutines are abandoned, not ended: a
// call running when it was killed runs on until it returns (its sends go
// nowhere), and its actors' Cleanup runs as in a proc whose bus is gone
// (a real SIGKILL runs none). A proc's agent never kills it as
// unresponsive (a real proc stopped or wedged, silent for the host
// timeout, is killed): its silence would be the whole process's
// starvation. Timeouts may be set shorter than a real job would bear
// (WithHostTimeout), since nothing here waits on a process.
//
// # Cost
//
// TestKillRestarts, 4 hosts x 8 procs, a mesh with a restart policy, a
// proc killed and its member restarted, runs in about 0.2s on two loaded
// cores (`go test -run TestKillRestarts -v ./actorrt/actortest/` prints
// its figures).
//
// Close stops what the client started, then waits for every runtime of
// the cluster to wind down: it leaves no goroutine, connection or file
// (TestCloseLeavesNothing). The cluster's job is listed nowhere: it keeps
// no record for monarch status (TestNoJobRecord). Its runtimes' system
// logs go where every program's do (the system log folder), and are
// pruned as theirs are.
package actortest
