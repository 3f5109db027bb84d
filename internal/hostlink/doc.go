// Package hostlink is how a host agent is admitted to its job, and then
// tells whether the agent's process is alive and its host reachable, from
// a signal its load cannot fake.
//
// Heartbeats say an agent ran recently; their absence says little: a
// starved agent (every core busy starting procs, a long GC pause, swap)
// is late, not dead. So every agent also holds a TCP connection to its
// job's link watcher (where the job's hub runs), on which nothing is sent
// after a short handshake. The kernels on both ends keep it: TCP
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
// # The handshake
//
// With WatcherOptions.TLS the connection is TLS (the agent trusts the
// job's CA only, so it talks to its own launcher or to no one); without,
// plain TCP. Either way the keepalive and the user timeout are set on the
// TCP connection beneath, and neither side reads or writes TLS records
// after the handshake. The lines, each bounded in length, the whole
// handshake (TLS and MUNGE included) within 10 s:
//
//	watcher: 16 random bytes, the challenge
//	agent:   <id> <hex HMAC-SHA256 of challenge and id under the token>
//	    or:  <id> munge <MUNGE credential>
//	agent:   none
//	    or:  cert <base64 PKIX public key>[ <name>,<name>...]
//	watcher: ok[ token=<base64>][ cert=<base64 PEM>]
//	    or:  error <why>
//
// then nothing, until the connection ends. An error answer, or a line
// that does not parse, closes the connection: no link, no event.
//
// # Proofs, and why the token is safe
//
// An agent that holds the job's token (it came over ssh's encrypted
// stdin) proves it without sending it: the HMAC. An agent started by
// Slurm does not hold it, since the step's environment crosses the
// network in Slurm's RPCs unencrypted; it proves instead that it runs as
// the job's user with a MUNGE credential (internal/munge), the proof
// Slurm itself trusts. The watcher takes it over TLS only, decodes it
// with its host's munged, and admits the agent when its uid is the
// watcher's own and its payload is exactly
//
//	monarch-link <job> <agent id> <hex challenge>
//
// Only a process of the job's user can make such a credential; munged
// refuses it a second time, and the challenge is this connection's, so a
// credential is good for one admission. Then, and only then, the answer
// carries the token: inside TLS, to a peer that verified the job's CA. A
// redial after a loss proves with the token it now holds (the HMAC).
//
// An admitted agent may ask for a certificate for a key it made (the
// private key never leaves it) and its names: the watcher's Certify signs
// it with the job's CA, for the agent's leaf or hub server. An agent is
// the job's user, as trusted as the launcher, so it may ask for any name.
package hostlink
