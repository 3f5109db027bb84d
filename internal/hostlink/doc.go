// Package hostlink tells whether a host agent's process is alive and its
// host reachable, from a signal its load cannot fake.
//
// Heartbeats say an agent ran recently; their absence says little: a
// starved agent (every core busy starting procs, a long GC pause, swap)
// is late, not dead. So every agent also holds a plain TCP connection to
// its job's link watcher (where the job's hub runs), on which nothing is
// sent after a short handshake. The kernels on both ends keep it: TCP
// keepalive probes, answered by the agent's kernel whether or not the
// agent gets any CPU, and a user timeout on unacknowledged data. So:
//
//   - the agent's process ends (exit, crash, kill -9): its kernel closes
//     the connection at once;
//   - its host goes down or the link between is cut: the watcher's kernel
//     closes it after Timeout without an answer;
//   - the agent is starved, or stopped (SIGSTOP): the connection stays up.
//
// A Watcher reports each agent's connection going up and down; whoever
// judges the agent's heartbeats takes a down link as the confirmation of
// a silence (see actorrt's health table). Dial keeps an agent's
// connection, dialing again after a loss until its context ends.
//
// The handshake proves the agent holds the job's token without sending
// it: the watcher sends a random challenge, the agent answers with its id
// and an HMAC-SHA256 of the challenge and the id under the token.
package hostlink
