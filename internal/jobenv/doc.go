// Package jobenv is the contract between the launcher and the processes
// of a job: the environment a launcher (monarch run, monarch local) gives
// the client and the host agents, and a host agent gives each proc it
// starts; the command line of `monarch agent` (AgentArgs); the names of
// the job's bus subjects; and the descriptors a launcher hands its
// client: where a captured client prints its procs' lines (OutputVar,
// ClientOutput, OutputEnd) and where an SPMD client reports its restarts
// (SPMDReport).
//
// Every variable is spelled once, here. A writer fills an Env and passes
// Env.Environ to the child; a reader calls FromEnviron, which fails
// naming the variable it cannot read. Subjects names the subjects.
// AgentArgs.Argv writes the agent's command line and ParseAgentArgs reads
// it, from one definition of its flags; no secret is ever on it, since any
// user of the host reads it: not the job's token, nor the values of the
// job's [env], which travel as the token does, sealed under it (SealEnv,
// OpenEnv; over ssh on stdin, WriteSecrets and ReadSecrets).
package jobenv
