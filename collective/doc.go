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
// Each member owns one buffer: for every dimension, two slots its
// predecessor in that dimension's ring writes into and two counters
// (messages received, messages of its own consumed). A message is written
// into the successor's slot (one-sided), then announced by a fetch-and-add
// on the successor's counter; the receiver consumes it from its own
// memory and acknowledges by a fetch-and-add on the sender's counter, so
// that at most two messages are in flight per link. Messages larger than
// a slot go in pieces. All-reduce is ring reduce-scatter then ring
// all-gather: each member sends and receives 2(N-1)/N of the data.
//
// A member waiting on a counter polls its own memory; every 100 ms it
// also reads a word of the peer it waits for, so a peer that died (its
// buffer gone) fails the collective at once with an error naming it, and
// every wait is bounded by ctx and by WaitBound.
package collective
