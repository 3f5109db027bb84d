// Package dtensor is distributed tensors: one program computing with
// tensors whose shards live on every proc of a mesh, one shard per proc,
// each a gorgonia.org/tensor Dense of float64.
//
// # Usage
//
//	m := dtensor.Activate(trainerProcs)
//	t, err := m.Rand(3, 4)                 // a different 3x4 shard on every proc
//	tt, err := t.T()                       // ops run on every proc, on its shard
//	d, err := t.MatMul(tt)                 // (3x4)(4x3): 3x3 per proc
//	s, err := dtensor.FetchShard(ctx, d, point)  // one proc's shard, here
//	sum, err := dtensor.Reduce(ctx, d, []string{"gpus"}, dtensor.Sum)
//
// Passing t.Shard() to an endpoint gives each actor (of a mesh on the same
// procs) its own proc's shard; Endpoint and RRef run an actor's endpoint on
// every proc's shard and keep the results there as a new tensor, whose
// shape a propagate function gives at once.
//
// # Ordering and errors
//
// Ops are sent, not awaited: each proc runs them in the order they were
// issued, so a later op sees an earlier one's result. An op that fails on
// a proc (a shape mismatch, say) leaves an error in place of its result;
// ops that use it fail the same way, and FetchShard (or Reduce) returns
// that error. Shapes are checked here first, so most mistakes fail at once.
//
// The tensors cross the bus as msgpack: this is for correctness and
// interactive work, not for speed; bulk data between procs belongs in
// ibverbs buffers.
package dtensor

// The tensor library pins a runtime property (no moving GC) by version;
// this import keeps that check current with the toolchain.
import _ "go4.org/unsafe/assume-no-moving-gc"
