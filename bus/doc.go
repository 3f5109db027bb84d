// Package bus is monarch's message transport: embedded NATS servers (a
// hub, the leaves that link to it) and the one connection each process
// holds to one of them.
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
// feeds one channel that the NATS reader fills in wire order, a goroutine
// of the Conn moves them on into a queue that grows as it fills, up to
// ConnOptions.QueueLen, and shrinks once drained (so an idle Conn holds a
// few KB, not its bound), and Run hands the messages to its handler one
// at a time in that same order (a message that finds Run waiting with
// nothing queued is handed over by the goroutine that takes it in, which
// saves waking Run's). So: if a
// process publishes M0 and then M1 (on any subjects) and another process is
// subscribed to both, its handler sees M0 before M1.
//
// Delivery is at most once, and never silently lossy: a message that could
// not be queued (slow consumer) or a lost link is reported to
// ConnOptions.OnError and, for a lost link, ends Run with ErrClosed; the
// caller decides what that means (a worker process exits, the client
// fails its pending calls).
//
// A Conn made with ConnOptions.ReconnectFor (the runtime sets it, to the
// host timeout, on the links of its procs, its host agents and the client
// of a launched job) reconnects when its link drops, to its server or,
// when that one died, to another server of the hub, keeping its
// subscriptions and buffering what is published meanwhile
// (ReconnectBuffer); its link is lost, as above, only when it stays down
// past ReconnectFor. Without ReconnectFor (the zero value) the first drop
// is final. The order above holds within each link, not across a drop:
// what was on the way when the link dropped, and what was sent to this
// Conn while it was down, is lost (never reported one by one: OnLink hears
// of the drop and of the return); and once it has moved to another server,
// a message it published before the drop can still be on its way through
// the old server (one that lives, a link cut between them) and arrive
// after messages published since. Nothing arrives twice. A caller that
// needs every message in order across a drop numbers them and asks again
// for what is missing: the runtime's delivery layer (internal/reliable)
// does, holding what comes early and dropping what it already has.
//
// # Hubs, leaves and clusters
//
// A bus can be a tree of servers. A hub (StartServer with Leaves) takes
// leaf nodes: StartLeaf starts an embedded server that links to a hub
// and serves its own clients, on loopback, one host's processes say.
// The leaf tells the hub of every subject its clients subscribe to, and
// the hub sends it, once, each message any of them wants: N subscribers
// on one leaf cost the hub one copy. A leaf can take a whole subtree of
// subjects for its own (Hub.Local, a Funnel): it tells the hub of the
// subtree once, when its link comes up, delivers what comes under it to
// its clients under another prefix, and never tells the hub of them, so
// clients that each subscribe a subject of their own there cost the hub,
// and every other leaf, nothing as they come and go. A hub can itself be several servers
// joined by routes (Cluster), each taking leaves; together they act as
// one. Leaves and routes present the hub's token, and use TLS when the
// hub has it; with a peer CA (ServerTLS, tls.go), they must also show a
// certificate it signed (mutual TLS).
//
// A leaf's link is NATS's own: when it is lost the leaf dials the hub
// again after 200 ms (every server of it, in the order given, starting
// with the one after the server it lost, and the servers it has learned
// of since), and Hub.OnLink hears of the loss and of the return. What
// was sent across the link while it was down is lost; unlike a Conn's,
// the loss of a leaf's link does not end its clients' links.
//
// Interest travels with the messages. A server handles the protocol of
// one connection in order: a leaf handles a client's SUB before that
// client's next PUB, and sends the hub the subscription before the
// message, on its one link; the hub handles the two in that order too,
// and passes the subscription on (to its other leaves, to its routes)
// before it forwards the message along the same links. Through one hub
// every path between leaves goes through the hub, so a process that
// subscribes and then tells another so (a proc that says it is ready) is
// reachable by that other process, and by any process that one tells in
// turn, once the news arrives. Across a cluster that fails for the third
// process: its message can come round by a server that has not yet heard
// of the subscription over its own route (110 of 5000 rounds across
// three servers lost their message without the remedy; see
// TestInterestRaceCluster). The remedy is
// ConnOptions.HubServers: with it a Publish that follows a Subscribe
// waits until every live server of the hub has answered a probe sent
// after the subscription (at most HubSyncBound; see below). What holds nowhere is order between a subscription
// and a message that do not follow each other: a process that subscribes
// and one that publishes at the same moment, each on its own leaf, can
// cross, and the message is then lost as a message nobody wanted; a
// question that may cross an answer must be asked again.
//
// # A hub server that dies
//
// With a hub of several servers, one can die (its process is killed, its
// host goes down) while the job goes on:
//
//   - its peers drop their routes to it at once when its process ends
//     (the kernel resets the connections), or within RouteStale (2 s:
//     a ping each half second, three unanswered) when its host goes
//     silent;
//   - its leaves dial the next server of their list within about 200 ms
//     of noticing (at once for a reset link; a silent one is noticed by
//     pings, 10 unanswered each 2 s: see LeafMaxPingsOut), and their
//     clients stay connected to them throughout;
//   - a Conn connected to it (ReconnectFor set) moves to another server
//     of the hub: one of its URLs, or one its server named;
//   - a Publish waits for the hub's probe (HubServers > 1) only after a
//     Subscribe or a reconnect, and then at most HubSyncBound (3 s): the
//     probe waits for the servers the live ones name, so a dead server
//     stops counting as soon as its routes are dropped, and one still
//     named but silent for HubSyncBound is waited for no more (until it
//     answers again);
//   - what was on the way through it is lost, and what its leaves and
//     Conns were sent while they moved: the runtime's delivery layer
//     finds the gaps (numbers, fences, tail markers) and resends, so no
//     actor message is lost, as for any link that drops and comes back
//     within the host timeout.
//
// The processes of the dead server's own host are gone with it: that is
// a host lost, which the job's liveness and supervision report.
//
// # Sizes
//
// The server's max payload is DefaultMaxPayload (8 MiB) unless set. Publish
// splits a message over 1 MiB (or the max payload, if smaller) into chunks
// of that size, sent in order with a small NATS header each, back to back,
// and Run reassembles them before the handler sees the message, copying
// each byte once; a message over ConnOptions.MaxMessage is refused with
// ErrTooLarge before any of it is sent. PublishParts sends a message given
// in pieces (a header and a large buffer, say) without joining them first;
// PublishNow does the same without waiting in a batch, for a caller that
// batches on its own (the runtime's delivery layer packs bursts into runs,
// and sends payloads past 256 KiB out of band, off the bus).
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
