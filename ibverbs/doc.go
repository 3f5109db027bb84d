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
//	err := h.ReadAt(ctx, local[8:16], 4096)   // a span on both sides
//	old, err := h.FetchAdd(ctx, 0, 1)         // atomics on 8-byte words
//	err := h.WriteAdd(ctx, msg, 64, 0, 1)     // a write, then an add that announces it
//	c, err := h.Connect(ctx, tag)             // a byte stream to the owner, which
//	c, err := buf.Accept(ctx, tag)            // takes it here (two-sided)
//	err := ibverbs.Do(ctx, ops...)            // a batch, submitted at once
//	err := h.Check(ctx)                       // does the owner serve h? (moves nothing)
//
// Typed: View[float32](buf) is the buffer as a []float32 (no copy), and
// Bytes(s) a []float32's bytes for ReadAt and WriteAt; element i is at
// byte 4*i. Memory the program already has becomes a buffer with
// Register(mem), no copy: other processes read and write mem itself,
// through tcp (shared memory cannot be laid over an existing slice, so a
// peer on the same host copies through a loopback socket, where it
// would map a NewBuffer and copy from it directly).
//
// # Backends
//
// A backend moves a transfer's bytes. Each is one implementation of the
// package's internal backend interface, in its own file, which adds it
// to the binary from an init function:
//
//   - name: how MONARCH_RDMA_BACKEND and Handle.Backend spell it;
//   - usable(h): whether it reaches h's buffer from this process, and if
//     not why, in one line ("owner on another host");
//   - read(ctx, h, off, dst) and write(ctx, h, off, src): copy between
//     local bytes and the buffer's bytes from offset off on.
//
// The backends, in the order they are tried:
//
//   - verbs: InfiniBand verbs, in verbs.go, built with -tags verbs (cgo
//     over libibverbs; testdata/verbs/setup.sh installs libibverbs-dev):
//     RDMA READ, WRITE and the two atomics on RC queue pairs, one per
//     owner, whose connection data (LID, GID, QPN, PSN) goes over the
//     owner's TCP server with the buffer's key; buffers are registered
//     with the device when they are made, and a handle carries the
//     address and rkey. It is used only where ibv_get_device_list finds a
//     device with an active port; elsewhere it says why, once, on stderr
//     ("ibverbs: no RDMA device (ibv_get_device_list found none):
//     transfers use shm on a host and tcp between hosts"). No machine of
//     this project has a device: the backend compiles in every test run,
//     and its test skips with that reason. Whether an HCA's atomics agree
//     with shm's and tcp's on one word (some write the old value
//     big-endian) is not checked;
//   - shm: same host: the buffer lives in a memfd mapping, which a reader
//     on the host maps at its first transfer and copies from directly.
//     The memfd's name carries a digest of the buffer's key, and a reader
//     opens the file at the handle's fd only if it has the name of the
//     key its handle holds: as over tcp, the key is the right to the
//     buffer, and a handle made up from what /proc shows of another
//     process's buffer (its pid, fd and size) reads nothing. It
//     keeps the mapping for later transfers; as a mapping keeps the
//     buffer's memory alive after its owner closed it, a process keeps at
//     most 256 of them and 4 GiB mapped (the most recently used one even
//     if larger): past either bound the least recently used leaves first,
//     unmapped once no transfer uses it. Handle.Forget drops a handle's
//     mapping (and binding) without waiting for that;
//   - tcp: anywhere: the owner process serves its buffers on a TCP port of
//     the address it reaches the job's bus from; a request carries the
//     buffer's random key, so a handle is a capability. A transfer of 8
//     MiB or more is cut into parts on parallel connections
//     (MONARCH_RDMA_TCP_STREAMS, default 4): 256 MiB arrive about 1.3x as
//     fast as on one plain stream here. When the job's bus uses TLS, so
//     does this server: each owning process makes a self-signed
//     certificate, and its handles pin its SHA-256 (tls.go). Anyone who
//     reaches the port can connect, and nothing is spent on a connection
//     before it proves itself (the server's door, internal/door, which
//     the job's link watcher has too): its first request must name a
//     buffer of the process by its key, whole within 5 seconds of its
//     first byte (TLS handshake included). Until it sends anything a
//     connection is held, a socket in an epoll set (no goroutine, no
//     buffer), for 30 to 60 seconds; then it reads only its request's
//     header, one of at most 1024 reading, 128 per source (an IPv4
//     address, an IPv6 /64, all of loopback). The held are bounded per
//     server (65,536) and with the process's other doors by two thirds
//     of its descriptors, the busiest source's oldest giving way past
//     the bound, and so are the reading, the oldest of the source giving
//     way: a flood of connections that never prove themselves is held,
//     not cut (which would only make it open more, at the processors'
//     cost), and a client's connection, readable at once, goes past it
//     (a 4 MiB read on a new connection under a flood of 10,000 from
//     another process takes about as long as without,
//     BenchmarkTCPUnderFlood). A request naming no buffer is answered so
//     and its connection closed (without the penalty the link watcher
//     gives a failing source: a peer of a buffer closed a moment ago is
//     one of the job's). A peer that
//     proved itself cannot make the owner hold connections without end
//     either: the server closes a connection on which no request starts
//     within 2 minutes, and one whose request stops moving (a MiB of
//     it, or of its answer, not moved within a minute: a large transfer
//     over a slow link is bounded by its progress, not its length); it
//     serves at most 4096 connections at once, and closes new ones past
//     that, until some end (saying so once on stderr). A client holds
//     the owner to progress in turn: reaching it (connection and TLS
//     handshake) within 10 seconds, and each MiB of a request or its
//     answer moving within 10 seconds, so that an owner that accepts and
//     never answers fails a transfer in seconds, naming it. It keeps an
//     idle connection for a minute at most, and sends a request again on
//     a new connection when one turns out closed before the owner
//     answered any of it: at once after an idle one, and for 5 seconds,
//     with pauses, after a new one the owner's door let go (so an atomic
//     is never applied twice, and a flood delays a transfer rather than
//     fails it).
//
// Beside the one-sided transfers, a peer can open a plain byte stream to
// a buffer's owner (Handle.Connect with a tag, taken by the owner's
// Buffer.Accept with the same tag), through the owner's TCP server
// whatever the backend: for data both ends agree on the order of, which
// the owner reads straight where it goes, paced by TCP's flow control
// (the collective package's ring links between hosts). The server hands
// the connection over after the request and no longer bounds it; at
// most 256 wait per buffer to be accepted, and closing the buffer closes
// those.
//
// Atomics (FetchAdd, CompareAndSwap) are the processor's on the owner's
// memory, whichever backend issues them (shm on the mapping, tcp in the
// owner's server), so they are atomic with each other across processes
// and backends. One that changes a word also wakes the owner's waiters
// on it: Buffer.Wait blocks on the word, a shared futex, rather than
// polling it (wait.go; the verbs backend's atomics, the device's, wake
// nobody, and a waiter returns at its timeout).
//
// A handle is bound to a backend once per process, at its first use there
// (its first transfer, or Backend): to the one MONARCH_RDMA_BACKEND names
// if it is set, else to the first in that order that is usable. It keeps
// that backend for the life of the process, so changing the variable
// later does not move a handle already used; the binding is dropped when
// a transfer through it fails (the buffer closed, its owner out of reach
// or stalled, the handle made up: a handle that does not work leaves
// nothing bound), or by Handle.Forget, which a reader done with a handle
// calls so that what it keeps for handles does not pile up. A reader
// given a handle by a peer asks its owner first (Handle.Check, a read of
// no bytes) before it allocates the memory the handle claims; a handle a
// transfer through which succeeded, and none failed since, is not asked
// again (a sender's pooled buffer, read once per payload). A transfer that cannot bind fails with ErrBackend saying
// why: a forced name that is not a backend of this binary (with the valid
// ones), the forced backend's reason for not reaching the buffer (a
// forced backend has no fallback), or each backend's reason; nothing is
// bound then, and Backend says "none".
//
// A process keeps, in one value made at its first buffer or transfer, what
// is per process by nature: the buffers it owns and the TCP server that
// answers for them, the backends' caches (shm's mappings, tcp's idle
// connections) and the bindings.
//
// # Concurrency
//
// Buffers and Handles are safe for concurrent use. Like RDMA, nothing
// orders a transfer with the owner's own use of the memory: the program
// must not change the buffer while a transfer reads it.
package ibverbs
