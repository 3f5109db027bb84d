// Package delivery is the layer between a process's runtime and its bus
// link that makes the job's messages reliable: none lost, repeated or
// reordered from one sender to each receiver, whatever mix of subjects
// carries them, across a link that drops and comes back. It drives the
// state machines of internal/reliable (their decisions are tested there,
// by scripts) with the job's frames (internal/wire) and the bus.
//
// # Usage
//
// A runtime makes one Layer (New), runs it (Run: ticks, answers, runs
// that wait), and sends every frame through it: Send to one destination
// (ToProc, ToGroup, Unsequenced), SendAll to several. Every frame the
// link receives goes to Receive, on the one goroutine that takes them in
// wire order; the layer hands the runtime's frames to Config.Route in the
// order they are due, and reports what can never be delivered to
// Config.Lost and what it refuses to Config.Drop; it asks who is a
// member of the job (Config.Standing, Config.Ask: Judged answers).
// Subscribe before a mesh's subject is subscribed to, ProcGone when a
// proc ends, LinkUp when the link comes back, Close before the link
// closes.
//
// The path of a message is then one way in each direction:
//
//	send:    adverbs -> runtime -> Layer.Send (number, fences, run) -> Link -> bus
//	receive: bus -> runtime's dispatcher -> Layer.Receive (order, hold, NAK) -> Route -> runtime
//
// # What it sends
//
// Frames on a proc's or a mesh's subject are numbered per sender and
// subject, with fences across subjects, and kept until acknowledged
// (reliable.Outbox); frames to standalone host agents and other subjects
// are not. While a burst to one subject lasts, small frames travel as one
// run (wire.KindRun): one number stamp, header, publish and kept copy for
// the run, one sequencing check and parse on arrival. A payload past
// OutOfBand (256 KiB) travels out of band (oob.go): the sender copies it
// once into a pooled ibverbs buffer and the frame carries a reference;
// the receiver asks the buffer's owner whether it serves it before it
// allocates anything, reads it into memory of its own, releases it
// (wire.KindRelease), and routes the frame, later frames of that sender
// waiting behind it: for seconds at most if the owner stalls, and then
// the frame fails to whoever waits for it. Memory a payload was read into
// that the program gives back (Recycle, recycle.go) is what later
// payloads of about its size are read into: memory already faulted in.
// The layer's own frames are tail markers (wire.KindTail), resends
// (KindResend), NAKs and their "no longer held" answers (KindNak),
// acknowledgements (KindAck) and releases.
//
// # What it refuses
//
// Every id and key read from the wire is checked (wire.ValidID,
// wire.ValidKey) before it names a subject, a map entry or a log line;
// run framing and transport bodies are checked before they are read. A
// frame that fails is dropped and counted, never fatal. What a peer can
// make the layer hold is bounded (reliable.InLimits).
//
// A peer holding the job's token that is no member of it (a buggy
// program, one that kept a stale job's token) can neither end, stall nor
// bloat the job through the layer: messages are said lost (Config.Lost)
// only on a member's word, for numbers this process asked it for; a
// number too far past what its sender can have sent is refused, not
// waited for; a gap no one answers is given up on without a loss; and
// senders not known to be members are the first forgotten when the
// sender table is full, so made-up senders cannot lock out a new proc.
// Who is a member the layer asks the runtime (Config.Standing, then
// Config.Ask and Judged for a sender it does not know once it delivered
// from it). A token holder that impersonates a live member exactly (its
// id and the numbers it is at) is not told apart: the token is the
// boundary.
//
// # Concurrency
//
// A Layer is safe for concurrent use. Sends are serialized (frames leave
// in the order of their numbers); Route is called one frame at a time,
// under the layer's receive lock, from Receive's goroutine, Run's, or the
// one that read a payload out of band. Run never holds the send lock
// while it waits for the receive lock, so Route may send.
package delivery
