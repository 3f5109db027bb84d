// Package launch gets a job running and takes it down again: the job's
// bus, a host agent on every host, and the client program.
//
// # Usage
//
//	code, err := launch.Run(ctx, launch.RunConfig{Job: job, Hosts: hosts})   // monarch run
//	job, err := launch.LocalJob("./train", args)                             // monarch local -- ./train
//	code, err = launch.Run(ctx, launch.RunConfig{Job: job})
//
// # Schedulers
//
// Run itself is the same for every kind of hosts: it starts the job's bus,
// records the job, starts the client and supervises it. What differs is
// behind the scheduler interface (scheduler.go), one implementation per
// file, each registered under its hosts file's scheduler key:
//
//   - prepare says where the job runs from here: the hosts in order,
//     whether they are remote (then the bus must be reachable from them,
//     and advertises this machine's address on the route to them), the
//     monarch binary on them; or that the scheduler must first run the
//     job itself (Slurm outside an allocation: salloc).
//   - start starts one host agent per host, with the agent's command line
//     (jobenv.AgentArgs) and environment (jobenv.Env): never a secret in
//     argv, neither the token nor the values of the job's [env], which
//     go sealed under the token (jobenv.SealEnv) where the token goes. First it sends the hosts the monarch binary and the program
//     where they lack them ([ship], ship.go): over ssh (shipssh.go) or by
//     sbcast inside the allocation (shipslurm.go), into a cache on each
//     host keyed by sha256 (internal/bincache); the agents then run the
//     cached copies, and only them: a cache another user could write to,
//     a copy that fails its sum, a check or a transfer that fails, fail
//     the launch, and the agent runs the program only if it has the sum
//     sent (AgentArgs.ProgramSum), from the descriptor it checked.
//
// A scheduler with a queue of batch jobs of its own (queue) takes a
// detached job (--detach) into it; the job store asks it what became of
// such jobs (status) and cancels them (stop). Without a queue, a detached
// job's launcher runs here in the background (detach.go). Either way the
// job has one id from the start: the record is written at submit, and the
// launcher that runs the job later takes it over (RunConfig.JobID), a
// requeued run too. A new scheduler is one file here and its table in
// hostsconfig.
//
//   - slurm: inside an allocation, one srun step with one agent per node,
//     run with --kill-on-bad-exit=0 and --wait=0: an agent that ends (its
//     host lost) ends alone, the other hosts' agents and procs go on, as
//     over ssh, and srun's line for its task reports it by itself
//     (slurmtasks.go). With TLS, the agents start without the secret,
//     which each receives over its TLS link to the link watcher once a
//     MUNGE credential proves it runs as the job's user (links.go,
//     slurm.go's mungeToken); with tls = false, the secret is in the
//     step's environment. Outside an allocation, Run re-runs `monarch
//     run` under salloc with the job's resources, or submits it with
//     sbatch (Detach; with --signal=B:USR1 for the time-limit warning,
//     --requeue when asked). Requests carry --immediate, so Slurm's own
//     errors come back in seconds. Its queue: squeue, scancel.
//   - ssh: one session per host, at most Parallel being set up at once; the
//     secret goes on stdin and the session stays open: closing it ends the
//     agent and its procs.
//   - local: agents are processes of this machine (simulated hosts h0,
//     h1, ...); without a hosts file, none: the program runs alone.
//
// The bus listens where the hosts can reach it; a loopback address for
// remote hosts is refused at start. It is the job's hub: each host's
// agent links a leaf node of its own to it (see internal/hostagent), and
// with [bus] hubs = K it is the first of K servers, the others in the
// agents of the first K-1 hosts.
//
// # Jobs that wait on jobs
//
// A job may wait for others (RunConfig.After: --after, --after-ok,
// --after-any, with Slurm's meanings; after.go). Submitted to a queue
// (--detach on Slurm) it waits there: sbatch gets --dependency with the
// other jobs' ids in the queue and --kill-on-invalid-dep=yes. Otherwise
// its launcher waits before it starts anything (a detached one in the
// background, a foreground one before salloc, which cannot end a job
// whose dependency failed): it records the job Pending with what it
// waits for, reads the job store about once a second, and runs the job
// once every dependency is met, or ends it, stopped before it ran, once
// one never can be (the job failed, was stopped, or is lost).
//
// # Teardown
//
// Every process the launcher starts (client, local agents, srun, ssh,
// salloc) is started by internal/child, with a parent-death signal, so
// none can outlive the launcher; the procs carry their own. SIGINT to the
// launcher is passed to the client, which stops its procs and exits.
// SIGTERM (monarch stop, a preemption) asks the client to stop: its
// program has the job's stop_grace to return (actorrt.Preempted). SIGUSR1,
// or the launcher's own timer [slurm] signal_before ahead of an
// allocation's end, is passed on as a time-limit warning. Then the agents
// are stopped (stdin closed, SIGTERM, SIGKILL after the grace period). A
// client that has not exited within the grace period (after a stop: the
// stop grace and the grace period) is killed. Under salloc, which passes
// no signal on, they go to the monarch run it runs. If an agent cannot start, the launcher says why (with
// the scheduler's or ssh's own words), stops the job and exits 1.
//
// # Arrays
//
// A job with an array ([array], --array) runs as tasks, each a job of its
// own, ID_I (jobstate.TaskID), with MONARCH_ARRAY_INDEX, MONARCH_ARRAY_JOB
// and its own env and args (array.go). Every task's record is written
// when the array starts. Here, over ssh and inside an allocation, the
// array's launcher runs each task as a child launcher (monarch run
// --job-id=ID_I --array-index=I, through internal/child), at most %N at
// once, its output in ID_I.out; it stops them on SIGINT/SIGTERM and, with
// fail_fast, when one fails. Outside an allocation, Slurm takes the array
// as one sbatch --array, whose batch jobs run --array-index=slurm (the
// task SLURM_ARRAY_TASK_ID names); monarch run follows it (slurmarray.go)
// and status asks scontrol once per array (arraystatus.go). Find takes
// ID:I and Slurm's ARRAYID_I for a task.
//
// # State
//
// Each run records its job in the state directory (DefaultStateDir), which
// Status lists, Find resolves (the job's id, or its batch job's) and Stop
// acts on. The record says how the job ended, as a user says it (end.go):
// monarch stop leaves a request beside the record before it signals, the
// scheduler's queue says when it is ending the job (scancel, a time limit,
// a preemption, a requeue: Slurm counts the next run before this one
// ends), the client reports what failed on the job's failure
// subject, and a signal of the launcher's own is named.
//
// A default folder another user squatted (the state directory, the
// system logs' /tmp/$USER) does not stop the job: before it starts
// anything the launcher puts a fresh private one in its place, says where
// once, and passes it on in the environment to the processes it starts
// (squat.go).
package launch
