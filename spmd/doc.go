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
// The first is the one that failed first by its host's clock, of those
// heard of by the time the others were stopped (and at most a second
// more): a rank that failed because another did (its peer in a
// collective went away) may be heard of first, and is not the cause. It
// may even end first: a rank that raised can outlast the peers it failed
// while its interpreter winds down. So a rank that ended by exiting is
// placed at its last words, when its host's agent read the last line it
// wrote to stderr (at most 2 s before its end): a traceback, which comes
// before the errors it causes, as torchrun orders ranks by the time of
// their errors. A rank that wrote nothing then, or that a signal killed
// or the stop ended, is placed at its end.
//
// It returns an *actorrt.ExitError with that proc's status and an
// actorrt.Failure (rank, host, status or signal, the mesh, its last
// stderr lines), which the client reports to the launcher (monarch
// status JOB shows it). All exit 0: Run returns nil.
//
// # Restarts
//
// With Job.MaxRestarts N (a job's [spmd] max_restarts, monarch local
// --max-restarts), a rank's failure restarts the gang, as torchrun's
// --max-restarts does: the other ranks are stopped as above, Run says so
//
//	monarch: rank 1 on h0 failed: exited with status 1 ({hosts: 0, gpus: 1}); restarting all 4 ranks (restart 1 of 2)
//
// and every rank starts again, as a new mesh: a new MASTER_PORT (a new
// rendezvous), TORCHELASTIC_RESTART_COUNT the restarts so far (0 on the
// first attempt) and TORCHELASTIC_MAX_RESTARTS N. After N restarts the
// next failure fails the job as above: the job's status is the last
// attempt's. A stop of the job (ctx's end) is never restarted, and a
// spawn that fails (a host lost as it starts) ends Run with its error.
//
// # Elastic hosts
//
// Job.MinHosts and Job.MaxHosts are torchrun's --nnodes MIN:MAX (a job's
// [spmd] nnodes = "1:4", monarch local --nnodes 1:4; a plain N is N:N;
// by default every host of the job, none of which may be lost). The
// ranks run on the first MAX of the job's hosts (MAX more than the job
// has is an error; the hosts past MAX wait, to take a lost host's
// place). When a host is lost (its agent gone: its ranks end with status
// -1), every rank is stopped as above and the gang starts again on the
// hosts still up, at most MAX of them, as a new mesh: a new rendezvous
// (MASTER_PORT, and MASTER_ADDR if rank 0's host was lost), ranks
// renumbered densely over those hosts (RANK, WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE the hosts' count), TORCHELASTIC_RESTART_COUNT
// counting. Run says so on one line:
//
//	monarch: host h1 lost (ranks 2, 3 ended); going on with 1 of 2 hosts (min 1): restarting 2 ranks (restart 1 of 3)
//
// Such a restart counts against MaxRestarts, as under torchrun, whose
// --max-restarts is the number of failures or membership changes allowed
// ("regardless of whether the restart was caused due to a failure or a
// scaling event"): a training script resumes from its checkpoint after
// either, and a job whose hosts keep failing ends. So an elastic job
// wants MaxRestarts of at least MAX-MIN. With fewer than MIN hosts left,
// or no restart left, the job fails saying which, with status 1:
//
//	monarch: host h1 lost (ranks 2, 3 ended): 1 host left, fewer than MIN (nnodes 2:2); the other 2 ranks were stopped
//	monarch: host h1 lost (ranks 2, 3 ended): going on with 1 of 2 hosts needs a restart, and none is left (max_restarts 0); the other 2 ranks were stopped
//
// A lost host is told from a rank's failure by its agent's loss,
// whatever ended first: ranks that fail because their peers on the lost
// host went away (a collective's error) do not make it a failure of
// theirs. Once the others are stopped, the ranks a stop could not end
// (their agent silent: a host wedged, or cut off) are waited for until
// their host is lost at the job's [health] lost_after (at most 5
// minutes, or until the job is stopped), and only then is the cause
// told. Hosts never join a running job: a lost host's place is taken by
// a waiting one, if any, at the restart.
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
