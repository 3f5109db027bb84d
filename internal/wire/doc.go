// Package wire is the format of a monarch job's messages on the bus, and
// the host agent's control protocol: what the SDK (package actorrt) and a
// host agent both read and write. It knows nothing of actors, meshes or
// processes; it defines frames, the bodies of the agent's control ops,
// the errors that cross process boundaries, and the kinds of malformed
// message a receiver drops.
//
// # Frames
//
// A message on the bus is one frame:
//
//	[4-byte big-endian header length][msgpack header][msgpack payload]
//
// The header (Header) is what a receiver routes by: a msgpack array of 8
// fields, or of 11 when the frame is sequenced (Seq not 0; see
// internal/reliable):
//
//	[kind, target, port, replyTo, method, rank, flags, region]
//	[kind, target, port, replyTo, method, rank, flags, region, from, seq, fences]
//
// region is nil (the whole mesh) or a flat array of three numbers per
// dimension (start, size, kept); fences is nil or a flat array of pairs
// (key, seq), at most MaxFences; a sequenced header with seq 0 is
// malformed. The header is written and read by hand (it is on every
// message; the generic encoder's reflection was most of the per-message
// cost), with a fast path for its commonest forms (short names, one-byte
// numbers, no region). The payload (call arguments, a reply value, an error reply, a
// control body) is encoded straight after it into the same buffer by
// NewPayload's Writer, and Parse leaves it in place: payload bytes are
// never copied on either side. A large []byte is not even copied into the
// frame: EncodeBytes makes the frame refer to it, and the frame goes out
// as its parts (Writer.Parts). EncodeTyped writes a typed argument (the
// generated adverbs' way) without boxing it: the common types and the
// numeric slices directly, the rest through msgpack's reflection, the
// same bytes either way. On the way in, Values reads plain values
// (an argument list of []byte, strings, numbers, bools) without a
// decoder, and may hand out a large []byte in place.
//
// Numeric slices and arrays ([]float32, [4]int64, []bool, a named type
// over one; blocks.go) travel as one block of little-endian bytes, a
// msgpack extension of type BlockExt padded so that the elements are
// aligned from the payload's start, not element by element: a large one
// is shared into the frame as a []byte is, and DecodeSharedFor hands it
// out in place where it lands aligned. Its header names the element kind,
// so a block decoded into a slice of another kind is an error, never its
// bytes reinterpreted; a block decoded into an interface value (any) is
// an error that names it, since msgpack/v5 can give an interface no typed
// slice. Blocks written without the kind, as binary, or element by
// element (msgpack arrays, as before blocks) decode too.
//
// Kinds: KindActor, KindPort and KindControl are the runtime's; KindRun
// packs a run of messages to one subject under one numbered header (run.go:
// RunWriter, CountRun, Run); KindTail, KindResend, KindNak, KindAck and
// KindRelease are the delivery layer's own (transport.go: their bodies,
// read by hand). FlagOutOfBand marks a frame whose payload is read from
// its sender's memory, not carried.
//
// # Limits
//
//   - A header is at most MaxHeader bytes, and its region at most
//     MaxRegionDims dimensions (three numbers each).
//   - A frame is at most the limit its writer is given (the bus's largest
//     message): NewFrame and MarshalLimited refuse the first write that
//     would pass it, before its bytes are copied, with an error wrapping
//     ErrTooLarge.
//   - A payload's arrays and maps nest at most 10000 deep.
//
// # Guarantees
//
// Every length read from the wire is checked against the bytes present
// before anything is allocated: Parse checks the header's length and its
// region's, and CheckMsgpack (which DecodePayload runs first) checks every
// length in a payload, so that a frame of a few bytes cannot make its
// receiver allocate gigabytes. A malformed frame or payload is an error
// (wrapping ErrDecode from Parse), never a panic; the receiver drops it
// and counts it (Drops).
//
// # Concurrency
//
// Parse, CheckMsgpack, DecodePayload, MarshalLimited and the checks are
// safe for concurrent use. A Writer belongs to one goroutine from NewFrame
// to Free.
package wire
