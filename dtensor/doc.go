// Package dtensor is distributed tensors: one program computing with
// tensors whose shards live on every proc of a mesh, one shard per proc,
// each a gorgonia.org/tensor Dense of float64 (or float32: RandOf,
// FullOf, or the client's []float32; an op reads tensors of one element
// type and makes one of that type, gradients included).
//
// # Usage
//
//	m := dtensor.Activate(trainerProcs)
//	t, err := m.Rand(3, 4)                 // a different 3x4 shard on every proc
//	w, err := m.FromSlice(w0, 4, 2)        // the client's []float64: the same on every proc
//	x, err := m.Scatter("gpus", rows, 64, 4)  // 64 rows split over gpus: 32 per proc
//	tt, err := t.T()                       // ops run on every proc, on its shard
//	d, err := t.MatMul(tt)                 // (3x4)(4x3): 3x3 per proc
//	s, err := dtensor.FetchShard(ctx, d, point)  // one proc's shard, here
//	f := dtensor.FetchShardLater(d, point)       // ... sent for now, f.Get(ctx) later
//	sum, err := dtensor.Reduce(ctx, d, []string{"gpus"}, dtensor.Sum)  // on the procs
//	text, err := dtensor.Show(ctx, sum)    // every shard, under its point (Inspect: as tensors)
//	gs, err := dtensor.Grad(ctx, loss, w)  // d loss / d w on every proc, by gorgonia
//	g, err := dtensor.Reduce(ctx, gs[0], nil, dtensor.Mean)  // data parallel: their mean
//	u, err := dtensor.ToMesh(ctx, t, other)  // shard by shard to another mesh, proc to proc
//
// Passing t.Shard() to an endpoint gives each actor (of a mesh on the same
// procs) its own proc's shard; Endpoint and RRef run an actor's endpoint on
// every proc's shard and keep the results there as a new tensor, whose
// shape a propagate function gives at once.
//
// # Ops
//
// Every op is an entry of one table (ops, in ops.go), by name: how many
// tensors it reads, its shape rule (the shape of its result from its
// inputs' shapes and its parameters, or an ErrShape error naming the op
// and the shapes) and the function that computes it on a proc from the
// input shards and its scalar parameters. The ops are rand and full
// (Rand, Full, Zeros), data (FromSlice, Scatter, FromShards: the
// client's own data, carried in the op), allreduce and reducescatter (Reduce and
// ReduceScatter, run as collectives on the procs), pack and unpack
// (ReduceEach: several tensors reduced as one vector, pack.go), grad (Grad, see
// grad.go: gorgonia differentiates each proc's graph, which travels and
// is compiled once, gradcache.go) and gradfree (a graph the mesh no
// longer keeps), import (ToMesh:
// each proc reads its shard from the source proc's registered memory,
// one-sided), matmul, add, sub, mul,
// div, scale, shift (AddScalar), unary (Exp, Log, Sigmoid, Tanh, Softplus), softmax
// (over the last axis), sum (Sum and Mean over an axis), reshape,
// transpose (T), relu, row, rref (RRefEndpoint.RRef), optimize and
// optfree (Optimizer.Update and Free) and drop (which makes no tensor). The elementwise ops of two tensors (add, sub, mul, div)
// broadcast as NumPy does (broadcast.go): (4, 1) and (1, 1) make (4, 1),
// (4, 3) and (3) make (4, 3); Grad sums a gradient back over the axes
// its operand was stretched along. Shard data crosses the wire as its
// raw little-endian bytes. An op travels by its name; a proc refuses a name it does not
// know, or an op with the wrong number of inputs, with an error in place
// of the result. Adding an op is adding one entry and the public function
// that records it.
//
// # Ordering and errors
//
// The client keeps every tensor's shard shape and checks an op's shape
// rule when the op is recorded: shapes that do not fit fail at the call,
// with ErrShape ("dtensor: shapes do not fit: matmul of (2, 3) and (4,
// 5)"), and nothing is sent; each proc checks the rule again before it
// runs the op. Ops are sent, not awaited: each proc runs them in the order they
// were issued, so a later op sees an earlier one's result. The mesh keeps
// the ops every proc runs alike in an outbox and sends them together, one
// message per proc, when something waits for the procs (a fetch, ToMesh,
// a shard handed to an actor) or 2 ms after the first (outbox.go): an
// error sending a batch is returned by the next op or fetch. Grad takes
// along the ops of its graph not sent yet: each proc keeps them and runs
// one when its result is read, the loss taking its value from the
// gradient's run (deferred.go), so that a training step computes its
// forward pass once. An op that
// fails on a proc (an endpoint's error, say) leaves an error in place of
// its result; ops that use it fail the same way, and FetchShard (or
// Reduce) returns that error.
//
// # Training
//
// NewOptimizer(rule, params...) updates parameters on the procs: SGD
// (with momentum) or Adam (DefaultAdam(lr)). Its state (velocity,
// moments, step count) stays on the procs beside the shards, and Update
// sends one op per parameter, which makes the new parameter from the old
// one, its gradient and that state: the parameters never come to the
// client, and the *Tensor given to NewOptimizer refers to the new values
// after it. Data parallelism is Scatter for the data, FromSlice for the
// parameters (the same start everywhere), Grad, Reduce with Mean, Update:
//
//	x := s.Scatter(m, "procs", rows, n, features)  // each proc its rows
//	w := s.FromSlice(m, w0, features, 1)           // every proc the same w
//	opt, err := dtensor.NewOptimizer(dtensor.DefaultAdam(1e-2), w)
//	for range steps {
//		loss := ...                                // ops on x and w
//		s.Update(opt, s.ReduceAll(ctx, s.Grad(ctx, loss, w), dtensor.Mean))
//		s.DropAllBut(x, w)
//	}
//
// # A step without a check per op
//
// Every op returns (T, error). A Step runs the same ops and keeps the
// first error, as bufio.Scanner does: its methods return the tensor
// alone and do nothing once a call has failed; what they return then is
// a failed tensor (Grad and ReduceAll: one per tensor asked for) whose
// every use returns that first error, which Fetch returns and Err
// keeps. The tensors it makes are ordinary ones, and DropAllBut frees
// them at the end of a step, all but those it is told to keep:
//
//	var s dtensor.Step
//	h := s.Relu(s.Add(s.MatMul(x, w1), b1))
//	loss := s.Mean(s.Mean(s.Mul(h, h), 1), 0)
//	s.Update(opt, s.ReduceAll(ctx, s.Grad(ctx, loss, w1, b1), dtensor.Mean))
//	l, err := s.Fetch(ctx, loss, point)      // waits: the first error, named as the op's
//	s.DropAllBut(w1, b1)                     // the step's tensors, but the parameters
//	if err != nil { ... }
//
// A shape that does not fit is the step's error at once (the client
// checks it); an op that fails on the procs is its error at the next
// Fetch (or FetchLater's Get), as for the (T, error) calls.
//
// The tensors cross the bus as msgpack: this is for correctness and
// interactive work, not for speed; bulk data between procs belongs in
// ibverbs buffers.
package dtensor

// The tensor library pins a runtime property (no moving GC) by version;
// this import keeps that check current with the toolchain.
import _ "go4.org/unsafe/assume-no-moving-gc"
