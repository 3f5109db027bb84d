// Package ibverbs moves bytes one-sided between procs: a Buffer is memory
// that other procs can read or write through a small Handle, without the
// owner's code (or its actor's mailbox) taking part.
//
// # Usage
//
//	buf, err := ibverbs.NewBuffer(64 << 20)   // owner: shared memory, registered
//	copy(buf.Bytes(), weights)
//	h := buf.Handle()                         // small; send it in any message
//	...
//	err := h.ReadInto(ctx, local)             // anywhere: one-sided read
//	err := h.WriteFrom(ctx, update)           // or write
//
// # Backends
//
// A read or write takes the fastest way the two sides share:
//
//   - shm: same host: the buffer lives in a memfd mapping, which readers on
//     the host map once (mappings are cached) and copy from directly;
//   - tcp: anywhere: the owner process serves its buffers on a TCP port of
//     the address it reaches the job's bus from; a request carries the
//     buffer's random key, so a handle is a capability.
//
// InfiniBand verbs (RDMA READ/WRITE through libibverbs) need a device; this
// build has no verbs backend and says so through Backend. MONARCH_RDMA_BACKEND
// (shm or tcp) forces one.
//
// # Concurrency
//
// Buffers and Handles are safe for concurrent use. Like RDMA, nothing
// orders a transfer with the owner's own use of the memory: the program
// must not change the buffer while a transfer reads it.
package ibverbs
