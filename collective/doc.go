// Package collective runs collectives between the procs of a proc mesh:
// all-reduce (sum, mean, max, min), all-gather, reduce-scatter and
// broadcast over a named dimension. The data moves proc to proc through
// one-sided buffers (ibverbs: shared memory on a host, TCP between
// hosts); the bus only sets the group up. Actors call them from their
// endpoints, every member of the group together, as SPMD code calls NCCL
// or gloo.
//
// # Usage
//
//	// in the client: a member on every proc of procs
//	comm, err := collective.New(ctx, procs)
//	// pass comm to the actors (it is a value), then in each one:
//	err := collective.AllReduce(ctx, comm, "gpus", grads, collective.Sum)
//
// A collective over dimension d runs in each group of procs that differ
// only in d: over "gpus" of {hosts: 2, gpus: 4}, two groups of four. Every
// member of a group must make the same calls in the same order (the same
// op, dimension and length), one at a time per proc: a second caller in
// the same proc waits for the first.
//
// # How
//
// Each member owns one buffer, an area per dimension (comm.go, areaBytes):
// the ring's two counters and two slots, which its predecessor in that
// dimension's ring writes into, then a word per member of the dimension
// counting that member's direct messages, then two direct slots per
// member (the round's parity picks one). A collective takes one of two
// paths, by the size of its message to each peer, which the members agree
// on as they agree on the length:
//
//   - direct, up to min(SlotBytes, MaxDirectBytes) (64 KiB): one round in
//     which every member writes its message, behind a header (the call
//     and its length), into its own slot at every other member
//     (one-sided), and adds 1 to its word there; then it reads the
//     others' messages from its own memory, in the order of the members'
//     places, and combines them. All-reduce sends the whole vector to
//     every peer, reduce-scatter chunk p to member p, all-gather the part
//     to every peer, broadcast the data from the root (the others send
//     their header only). That is one step instead of the ring's 2(N-1),
//     and N-1 writes per member; every member combines in the same order,
//     so all-reduce gives the same bits everywhere. A member writes round
//     k+1 only after it has read everyone's round k, which each sent only
//     after reading all of round k-1: two slots per sender suffice, with
//     no acknowledgement;
//   - ring, above it: a round of headers only, as above, then the ring. A
//     message is written into the successor's slot (one-sided), then
//     announced by a fetch-and-add on the successor's counter; the
//     receiver consumes it from its own memory and acknowledges by a
//     fetch-and-add on the sender's counter, so that at most two messages
//     are in flight per link. Messages larger than a slot go in pieces.
//     A link through tcp is a connection instead (link.go): the sender
//     opens it to the receiver's buffer (ibverbs Handle.Connect, taken
//     by Buffer.Accept) at the first collective and keeps it; it writes
//     its pieces (1 MiB) one after the other, and the receiver reads
//     them, 256 KiB at a time, straight where they go (all-gather) or
//     into scratch memory it combines from while it is still in cache
//     (reduce-scatter), paced by TCP's flow control: no
//     slot to copy out of, no counter, no acknowledgement, nothing to
//     wait for but the data. The ring's steps are pipelined there
//     (link.go, pipeline): each piece of a step goes on as soon as the
//     step before has brought it in, rather than when all that step's
//     chunk is in. A guard checks on both neighbours every 100 ms meanwhile
//     and closes the connections when one is gone, ctx ends or nothing
//     moved for WaitBound, so no read or write stays blocked. Both ends
//     of a link pick it alike (by the backend between them); every
//     header says its sender's, and a member whose predecessor's
//     differs fails the collective saying so. Sums of float32 and
//     float64 are combined with SSE (sum_amd64.s).
//     All-reduce is ring reduce-scatter then ring all-gather: each member
//     sends and receives 2(N-1)/N of the data.
//
// The headers make every member check every other's call: members that
// disagree on the op, the root or the length (a different size on one
// proc) all fail with ErrMismatch naming both calls and both members,
// and the group stays usable. A collective that failed otherwise (a dead
// peer, ctx) leaves the group's counters as they were at the failure:
// make a new Comm.
//
// A member waiting for a message blocks on the counter word itself: a
// futex on its shared memory (ibverbs Buffer.Wait), which the peer's
// fetch-and-add wakes (through shm, on its mapping of the same memory;
// through tcp, in the owner's buffer server). It does not poll first:
// with more procs than cores, polling takes the core the peer needs. The
// block lasts until the next probe at most: every 100 ms the waiter also
// reads a word of the peer it waits for, so a peer that died (its buffer
// gone) fails the collective at once with an error naming it, and every
// wait is bounded by ctx (seen within 100 ms) and by WaitBound.
package collective
