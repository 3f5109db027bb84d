// Package jobenv is the contract between the launcher and the processes
// of a job: the environment a launcher (monarch run, monarch local) gives
// the client and the host agents, and a host agent gives each proc it
// starts; and the names of the job's bus subjects.
//
// Every variable is spelled once, here. A writer fills an Env and passes
// Env.Environ to the child; a reader calls FromEnviron, which fails
// naming the variable it cannot read. Subjects names the subjects.
package jobenv
