// Package jobview is a job's client's view of its running job: the live
// model of the job (Model) and the counts of its record (Counts), the control socket's handlers that serve it
// (`monarch status --watch`, `top`, `stacks`, `profile`, `exec`,
// `dashboard`), the exec queue, and the dashboard with its Prometheus
// endpoint (internal/dashboard, internal/metrics).
//
// # The model
//
// Model is pure: events in (a host heard, an actor mesh registered or
// stopped, what the client's supervision saw: failures, restarts, moves,
// proc ends; a round of the procs' figures), a snapshot out
// (jobctl.JobState) given what the runtime knows beside it at that moment
// (Live: the proc meshes it started, the ends its health table saw, where
// procs run, what it sent, the last log lines). It runs nothing, sends
// nothing and reads no clock: time comes in with the events. The scripts
// in testdata/model (TestModel) drive it.
//
// Counts counts the job's procs up and their hosts for the job's record
// (`monarch status`), from the procs' announcements and ends; the client
// writes the record, or reports the counts to its launcher (actorrt's
// jobrecord.go). Its scripts are in testdata/counts (TestCounts).
//
// # The view
//
// View holds the model under a lock, asks the procs for their figures
// only when the state is read (at most every FiguresEvery, so nothing is
// sent while nobody looks), and serves the control socket and the
// dashboard. It reaches the running job through Job, which the runtime's
// client implements (actorrt's jobside.go): what it knows now, a proc's
// figures, stacks and profile (its inspector's answers, whose wire types
// are here: Figures, Stacks, ProfileArgs), and commands on the job's
// hosts through their agents. The runtime tells the model what it sees
// through View.Step, behind an interface of its own.
//
// A proc answers of itself (its handled counts, stacks, profile): those
// answers are built in actorrt from its own actors; ReadSelf reads its
// CPU time and memory (internal/procstat) for it.
package jobview
