// Package door is where a listener that anyone on the network can reach
// keeps the connections it accepted until they prove themselves: the job's
// buffer server (ibverbs) and its link watcher (internal/hostlink) each
// put one in front of their listener, with their own proof and their own
// bounds (Limits). Nothing is spent on a connection before it proves
// itself but a socket, and a flood of connections that never do leaves
// the others their way in.
//
// # What happens to a connection
//
//   - Held. A new connection is held: its socket in the door's epoll set,
//     no goroutine, no buffer, a few hundred bytes of this process. A
//     client speaks first (its request, or its TLS hello) as soon as it
//     connects, so its socket turns readable at once; a flood's that sends
//     nothing never does, and is let go at a random time between
//     Limits.Hold and twice that (so that a flood that opens again does so
//     a little at a time), or when its peer hangs up.
//   - Reading. A readable connection gets a goroutine, the listener's
//     Config.Serve, which reads its proof: the door sets the connection's
//     deadline Limits.Prove after its first byte. A proof that passes
//     calls Conn.Through, and the connection is the listener's; a
//     connection whose Serve returns without it is closed.
//   - Waiting. A readable connection of a source that is penalized (see
//     below) is not read: it stays held, and when the penalty ends the
//     newest of its source are read first.
//
// # Bounds and fairness
//
// A source is a peer's IPv4 address, its IPv6 /64 (what one host holds),
// or the whole loopback (any user of a host may dial from any 127.x
// address): SourceOf. The connections reading are bounded overall
// (Limits.Reading) and per source (Limits.PerSource): a readable
// connection past its source's bound takes the place of its source's
// oldest reading, and past the overall bound that of the oldest of the
// source with the most. The held (and waiting) are bounded per door
// (Limits.Held) and, together with every other door of the process, by
// two thirds of the process's descriptors: past either bound the oldest
// of the source holding the most gives way (of the door holding the
// most, for the process's bound). What gives way is closed; the first
// time, the door says so (Config.Note).
//
// # Penalties, and why nothing churns
//
// Closing a connection that never proves itself only makes a flood open
// another, at the cost of both ends' processors, which the job's own work
// needs; so the door holds a flood rather than cut it. A source whose
// connection failed to prove itself (its Serve returned without Through,
// or it was displaced while reading) is penalized, when Limits has
// penalties: its readable connections wait, held, for PenaltyFirst,
// doubled for each failure that follows within PenaltyMost of the last
// penalty's end, up to PenaltyMost; a proof forgives it. A flood of
// connections that send a wrong proof as fast as they are answered thus
// costs a few proofs a second, not one per connection: the others wait,
// held, and what a penalty ends is read newest first, so that a client
// of the same source that came after the flood's connections is read
// before them.
//
// # Concurrency
//
// A Door is safe for concurrent use; Serve runs Config.Serve on a
// goroutine of its own per readable connection, and Close (or the end of
// Serve) waits for them to return.
package door
