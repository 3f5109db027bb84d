// Package bus is monarch's message transport: an embedded NATS server and
// the one connection each process holds to it.
//
// The package speaks subjects and bytes only. It knows nothing of actors,
// meshes or ports; the actor runtime builds those on top.
//
// # Usage
//
// The process that owns a job starts the server and connects to it without
// TCP; every other process dials it over TCP with the job's token:
//
//	srv, err := bus.StartServer(bus.ServerOptions{})      // loopback, random port and token
//	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "client"})
//	...
//	conn, err := bus.Connect(srv.URL(), bus.ConnOptions{Token: srv.Token()})
//	sub, err := conn.Subscribe("job.proc.7")
//	go conn.Run(ctx, func(m bus.Message) { ... })
//	err = conn.Publish("job.proc.7", data)
//
// # Ordering and delivery
//
// NATS keeps the order of messages from one publishing connection to one
// subscribing connection, across subjects. Every subscription of a Conn
// feeds one channel that the NATS reader fills in wire order, and Run hands
// the messages to its handler one at a time in that same order. So: if a
// process publishes M0 and then M1 (on any subjects) and another process is
// subscribed to both, its handler sees M0 before M1.
//
// Delivery is at most once, and never silently lossy: a message that could
// not be queued (slow consumer) or a lost link is reported to
// ConnOptions.OnError and, for a lost link, ends Run with ErrClosed. A Conn
// does not reconnect: a reconnect could lose messages in the gap and break
// the order above, so a lost link is final and the caller decides what that
// means (a worker process exits, the client fails its pending calls).
//
// # Sizes
//
// The server's max payload is DefaultMaxPayload (8 MiB) unless set. Publish
// splits a message over 1 MiB (or the max payload, if smaller) into chunks
// of that size, sent in order with a small NATS header each, back to back,
// and Run reassembles them before the handler sees the message, copying
// each byte once; a message over ConnOptions.MaxMessage is refused with
// ErrTooLarge before any of it is sent. PublishParts sends a message given
// in pieces (a header and a large buffer, say) without joining them first.
//
// # Malformed messages
//
// Whoever holds the job's token can publish anything. Every count, size
// and length in a batch or chunk header is checked against the bytes that
// actually came and against the limits (MaxMessage per message,
// MaxReassembly over all messages in reassembly, PartialTTL) before
// anything is allocated: a receiver holds at most twice the bytes it was
// sent. A message that does not add up is dropped and counted
// (Conn.Dropped, by DropKind); the first of each kind is reported to
// ConnOptions.OnError as a *DropError. A drop never closes the connection
// and never touches the messages before or after it.
//
// # Concurrency
//
// Publish, Subscribe, Flush and Close are safe for concurrent use. Run must
// be called once; its handler runs on Run's goroutine and must not block for
// long, or the queue fills and messages are reported lost.
package bus
