// Package launch gets a job running and takes it down again: the job's
// bus, a host agent on every host, and the client program.
//
// # Usage
//
//	code, err := launch.Run(ctx, launch.RunConfig{Job: job, Hosts: hosts})   // monarch run
//	code, err := launch.Local(ctx, launch.LocalConfig{Program: "./train"})    // monarch local -- ./train
//
// # Schedulers
//
//   - slurm: inside an allocation, one srun step with one agent per node
//     (the secret in the step's environment); outside one, Run re-runs
//     `monarch run` under salloc with the job's resources, or submits it
//     with sbatch (Detach). Requests carry --immediate, so Slurm's own
//     errors come back in seconds.
//   - ssh: one session per host, at most Parallel being set up at once; the
//     secret goes on stdin and the session stays open: closing it ends the
//     agent and its procs.
//   - local: agents are processes of this machine (simulated hosts).
//
// The bus listens where the hosts can reach it and advertises this host's
// address on the route to the first host; a loopback address for remote
// hosts is refused at start.
//
// # Teardown
//
// The client and local agents are started with a parent-death signal, so
// they cannot outlive the launcher; the procs carry their own. SIGINT or
// SIGTERM to the launcher is passed to the client, which stops its procs
// and exits; then the agents are stopped (stdin closed, SIGTERM, SIGKILL
// after the grace period). A client that has not exited within the grace
// period is killed. If an agent cannot start, the launcher says why (with
// the scheduler's or ssh's own words), stops the job and exits 1.
//
// # State
//
// Each run records its job in the state directory (DefaultStateDir), which
// Status lists and Stop acts on.
package launch
