// Package jobctl is the control channel of a running job: how a monarch
// command on the job's host asks the job's client something (its procs'
// goroutine stacks, profiles, a command run on its hosts, the live
// state of the job) and gets the answer.
//
// # Where it lives and who serves it
//
// The job's client runtime (the process that runs Main's function: it is on
// the job's bus and can ask every proc) serves a unix socket, with Listen,
// for as long as it runs; Close removes it. A command finds it from the
// job's id alone (SocketPath): <state dir>/<job>.sock, beside the job's
// record and log, or, when that path is longer than a socket path may be
// (108 bytes with its NUL), a short name made from a hash of both under a
// private runtime dir ($TMPDIR/monarch-<uid>/ctl). Both halves compute the
// same path, so nothing needs recording. The client, not the launcher,
// serves it: the client has the job's bus and its procs; the launcher of
// a job run directly does not exist.
//
// A unix socket rather than a TCP port or a bus subject: it needs no port
// and no secret, is reachable only on the host, and the kernel says who
// connects. Access is limited to the job's user twice: the socket's
// directory is private (0700, checked by internal/privfs) and the socket
// itself 0600 from the moment it is bound (its mode is set before bind:
// the process's umask, which all its goroutines share, is never changed);
// and each side checks the other's uid with SO_PEERCRED (the
// server refuses another user's connection; the caller refuses a socket
// another user serves).
//
// # Protocol
//
// One request per connection, one answer: each a JSON object on one line.
// A request is {"op": ..., "body": ...}, bounded by MaxRequest bytes; an
// answer {"body": ...} or {"error": "..."}, bounded by MaxAnswer. The
// server reads a request within IOTimeout, runs its op's Handler under a
// context that ends at the op's own bound (at most MaxOpTime) or when the
// server closes, and writes the answer within IOTimeout. An unknown op is
// an error answer naming the ops served. A streaming op (Op.Stream,
// stream.go) sends events, lines {"event": ...}, before its answer; its
// caller (CallStream) asks it to end by closing its side of the
// connection for writing, and still gets the answer. JSON lines keep the channel
// readable with socat and open to ops added later, each a Handler under a
// name (OpStacks, OpProfile, ...) with its request and answer types here.
// Ops that ask procs select them alike (Selection) and say of each proc
// asked why it gave nothing, if it did not (ProcInfo, FormatMissing).
//
// # Stacks
//
// OpStacks asks for the goroutine stacks of the job's procs
// (StacksRequest, StacksAnswer). Group folds identical goroutines across
// procs, with goroutine ids, wait times and argument values masked, as the
// log aggregation folds similar lines; Format prints an answer as
// `monarch stacks` shows it.
//
// # Profiles
//
// OpProfile asks for CPU profiles of a duration, or heap profiles, of the
// job's procs, all taken at once (ProfileRequest, ProfileAnswer): each as
// runtime/pprof writes it. The command merges them (with
// github.com/google/pprof/profile, which this package leaves out so that
// the jobs, which import it through actorrt and internal/jobview, do not
// carry it).
//
// # Exec
//
// OpExec runs a command on hosts of the job (ExecRequest), streaming its
// output (ExecEvent) and answering with how it ended on each host
// (ExecAnswer); ExecOutput prints the output as `monarch exec` shows it,
// each line prefixed by its host.
//
// # State
//
// OpState answers with a snapshot of the job as its client sees it
// (JobState, versioned by StateVersion, every field documented on its
// type): hosts and their last heartbeat; the proc meshes the client
// started, each proc's state, CPU time and memory; every actor mesh
// registered with the client, its extent and owner, each member's state
// (running, failed with its reason, restarting, stopped) and message
// counts (calls this client sent; messages the member handled, as its
// proc said), and per endpoint the calls handled, errors and handler
// times (EndpointState, buckets at DurationBounds); each proc's bus
// traffic and dropped messages; the client's own figures (Client); the
// last MaxEvents supervision events, their Totals, and the last
// MaxLogLines log lines. Counting (Counting) can be turned off with
// MONARCH_FEED=off. OpWatch streams it: a snapshot at once, then one
// whenever it changed, at most every WatchRequest.Interval (at least
// MinInterval), until the caller asks it to end. The client asks its
// procs for their figures (CPU, memory, handled counts) only while the
// feed is read, at most twice a second; what a snapshot holds is bounded
// by the job's size and these two rings.
//
// # Dashboard
//
// OpDashboard asks where the job's live dashboard (internal/dashboard) is
// served: a DashboardAnswer with its URL, token included, or why the job
// has none (`monarch dashboard`, `monarch status JOB`).
package jobctl
