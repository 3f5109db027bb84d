// Package metrics serves a running job's state as Prometheus metrics: an
// http.Handler (Handler) that, for each scrape, takes one snapshot of the
// job state feed (jobctl.JobState, from a Source: the job's client) and
// writes it in Prometheus's text format.
//
// # What it exports
//
// Every name has the monarch_ prefix; counters end in _total, times are
// in seconds, sizes in bytes. Labels: mesh is an actor mesh's name (for
// endpoint and member metrics) or a proc mesh's (for per-proc ones);
// endpoint an endpoint's name (or Supervise); proc a proc's id, host its
// host, rank its rank in its proc mesh (the client is proc "c", with
// mesh and rank empty); kind a kind of dropped message; state a state.
//
//	monarch_endpoint_messages_total{mesh,endpoint}       counter    calls handled
//	monarch_endpoint_errors_total{mesh,endpoint}         counter    calls that ended in an error
//	monarch_endpoint_duration_seconds{mesh,endpoint}     histogram  handler time of one call in 8 (jobctl.TimedEvery): 16 bounds, 50 µs doubling to 1.6384 s
//	monarch_mesh_calls_sent_total{mesh}                  counter    calls the client sent to the mesh's members
//	monarch_mesh_members{mesh,state}                     gauge      members running, failed, restarting, stopped
//	monarch_failures_total                               counter    member failures
//	monarch_restarts_total                               counter    members restarted by a restart policy
//	monarch_restarts_given_up_total                      counter    members a restart policy gave up on
//	monarch_unhandled_failures_total                     counter    failures that reached the client's fault hook
//	monarch_procs_ended_total                            counter    procs that ended (stopped ones too)
//	monarch_procs_failed_total                           counter    procs that ended without being stopped
//	monarch_log_lines_total                              counter    log lines the client received
//	monarch_hosts_up                                     gauge      hosts whose agent is up
//	monarch_procs{state}                                 gauge      procs running, stopped, failed
//	monarch_proc_cpu_seconds_total{proc,host,mesh,rank}  counter    CPU time (user and system)
//	monarch_proc_resident_memory_bytes{proc,host,mesh,rank}  gauge  resident memory
//	monarch_bus_received_messages_total{proc,host,mesh,rank}  counter  bus messages in
//	monarch_bus_sent_messages_total{proc,host,mesh,rank}      counter  bus messages out
//	monarch_bus_received_bytes_total{proc,host,mesh,rank}     counter  bus payload bytes in
//	monarch_bus_sent_bytes_total{proc,host,mesh,rank}         counter  bus payload bytes out
//	monarch_dropped_messages_total{proc,host,mesh,rank,kind}  counter  malformed messages dropped, by kind
//	monarch_feed_counting                                gauge      1 if the job counts messages (MONARCH_FEED), else 0
//
// and the Go runtime's own metrics of the process that serves them (the
// client): go_*, from client_golang's Go collector, in a registry of its
// own.
//
// A bus message may carry many actor messages (a batch) or part of one:
// the bus figures are the wire's, the endpoint figures the actors'. The
// per-proc figures are what each proc said last (a proc that does not
// answer keeps them; one that ended loses them, so a sum over procs may go
// down, which Prometheus reads as a counter reset). Command procs
// (WithCommand) have no figures and no per-proc series.
//
// # How many series
//
// Nothing is per member: a 1000-member mesh is two series per endpoint
// (messages, errors) and its histogram's 19 (17 buckets, +Inf included,
// a sum and a count), and four of members by state. Meshes are summed by
// name (a stopped mesh and a new one of its name are one), and the feed
// keeps at most 1024 stopped meshes, so the endpoint series are at most
// (live and remembered mesh names) × (their endpoints called) × 21.
// Per-proc series are 6 per proc, plus one per kind of drop that
// happened (at most 14 kinds: the runtime's 9 and the bus's 5). The rest
// is a fixed handful.
//
// # Access
//
// Handler does no authentication: whoever mounts it (the job's dashboard
// server) checks its token first. Prometheus sends the token with
//
//	scrape_configs:
//	  - job_name: monarch
//	    authorization: {credentials: <token>}
//	    static_configs: [{targets: ["<host>:<port>"]}]
package metrics
