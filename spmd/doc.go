// Package spmd runs a command on every proc of a job: the client of an
// SPMD job (`monarch run` of a job file with [spmd], or `monarch local
// --procs ...`), what `srun ... torchrun ...` does, for any program.
//
// # Usage
//
// As the function a job's client runs (actorrt.Main):
//
//	err := spmd.Run(ctx, spmd.Job{Command: []string{"python3", "train.py"}})
//
// Run spawns the job's procs ([procs] per host, on the hosts the launcher
// started) with the command, so each proc finds the torchrun variables
// (see actorrt.HostMesh.SpawnProcs), and waits for them. Their output
// reaches the client like any proc's. The first proc that exits non-zero
// fails the job: the others are stopped (SIGTERM, then SIGKILL after the
// stop timeout) and Run returns an *actorrt.ExitError with that proc's
// status, having named its rank and host. All exit 0: Run returns nil.
package spmd
