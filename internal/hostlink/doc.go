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
// after the handshake. The agent speaks first: its TLS hello, or over
// plain TCP the greeting line "monarch-link". Then the lines, each
// bounded in length; the TLS handshake (or the greeting) and the hello
// within 5 s of the agent's first byte, the whole handshake (MUNGE
// included) within 10 s of it:
//
//	agent:   monarch-link            (plain TCP only)
//	watcher: 16 random bytes, the challenge
//	agent:   <id> <hex HMAC-SHA256 of challenge and id under the token>
//	    or:  <id> munge <MUNGE credential>
//	agent:   none
//	    or:  cert <base64 PKIX public key>[ <name>,<name>...]
//	watcher: ok[ token=<base64>][ cert=<base64 PEM>]
//	    or:  error <why>
//
// then nothing, until the connection ends. An error answer, or a line
// that does not parse, closes the connection: no link, no event. An
// answer "error busy: ..." says the watcher could not check the proof
// now (see Bounds); Dial tries again.
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
//	monarch-link <job> <agent id> <hex challenge> <hex binding>
//
// where the binding is 32 bytes of keying material exported from the
// connection's TLS session (RFC 5705, label EXPORTER-monarch-link-munge):
// both ends of one session compute it, and no one else. Only a process
// of the job's user can make such a credential; munged refuses it a
// second time, and the challenge and the binding are this connection's,
// so a credential is good for one admission, on the connection it was
// made for: one relayed to another TLS session (by a peer that holds a
// certificate of the job's CA, say) names the wrong binding and is
// refused. Then, and only then, the answer carries the token: inside
// TLS, to a peer that verified the job's CA. A redial after a loss proves
// with the token it now holds (the HMAC).
//
// An admitted agent may ask for a certificate for a key it made (the
// private key never leaves it) and its names: the watcher's Certify signs
// it with the job's CA, for the agent's leaf or hub server. An agent is
// the job's user, as trusted as the launcher, so it may ask for any name.
//
// # Bounds
//
// Anyone on the network may dial the watcher, so nothing is spent on a
// peer before it proves itself but a socket, and a flood from some hosts
// leaves room for the agents of the others. The watcher's door
// (internal/door, shared with the buffer server) holds a peer that sends
// nothing, a socket in an epoll set (no goroutine, no TLS), and lets it
// go between 30 and 60 s later; only a peer that speaks is read. At most
// 512 handshakes are under way at once, 32 of one source (an IPv4
// address, an IPv6 /64, or the whole loopback, from any 127.x address of
// which any user of a host may dial); a readable peer past its source's
// bound takes the place of its source's oldest in handshake, past the
// overall bound that of the busiest source's oldest. A peer has 5 s from
// its first byte to its proof. A MUNGE credential is checked for munge's
// shape and a length that fits its payload before it is decoded; at most
// 4 are decoded at once (a process each), one per source, each waiting
// at most 3 s for its turn (else "busy"). A source whose peer failed to
// prove itself (a wrong or late proof, a malformed line, displaced) is
// not read for 10 ms, doubled for each failure that follows, up to 1 s,
// and forgiven by a proof: its peers wait, held, and when the penalty
// ends the newest are read first. Nothing of a flood is cut that it
// would only open again: a flood of silent connections costs the watcher
// their sockets, and one that sends wrong proofs as fast as it is
// answered a few handshakes a second, not one a connection. Under a
// flood of 10,000 connections of another user, silent or active, an
// agent's admission takes 1.3 to 1.6 times as long as without
// (BenchmarkAdmissionUnderFlood): what remains is unmunge's fork and
// exec, which cost a few ms more in a process that holds 10,000 more
// descriptors (the kernel copies and closes them). Dial
// tries a first admission again, after pauses from 50 ms doubling to 2
// s, for 30 s, while the watcher drops it or answers busy. An agent on a
// host from which another user floods the watcher shares that host's
// bounds (and penalties) with the flood: it is admitted when its tries
// find room.
package hostlink
