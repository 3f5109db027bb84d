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
// started) with the command, as the mesh "spmd", so each proc finds the
// torchrun variables (see actorrt.HostMesh.SpawnProcs), and waits for
// them. Their output reaches the client like any proc's.
//
// # Failures
//
// The first proc that exits non-zero fails the job: the others are
// stopped (SIGTERM, then SIGKILL after the stop timeout), their last
// lines printed, and then Run says, last, what failed, naming the host
// once:
//
//	monarch: rank 3 on h2 failed: exited with status 1 ({hosts: 1, gpus: 1}); the other 3 ranks were stopped
//
// It returns an *actorrt.ExitError with that proc's status and an
// actorrt.Failure (rank, host, status or signal, the mesh, its last
// stderr lines), which the client reports to the launcher (monarch
// status JOB shows it). All exit 0: Run returns nil.
//
// # Notices
//
// When the job is about to end (a time-limit warning: SIGUSR1 to the
// client, which monarch run sends [slurm] signal_before ahead of the
// limit; or a stop: monarch stop, a preemption), every proc whose command
// catches Job.NoticeSignal (SIGUSR1 by default: what Slurm's --signal and
// submitit use for "checkpoint now") is sent it; a command that does not
// catch it is not, since its default action would end it. A warning is
// only that: the job runs on. On a stop, the ranks that got the notice
// have half the stop grace to checkpoint (or end), then every rank gets
// SIGTERM and the rest of the grace, as under torchrun, then SIGKILL.
package spmd
