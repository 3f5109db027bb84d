package actorrt

import "github.com/vmihailenco/msgpack/v5"

// callArgs encodes an adverb's arguments into its call's frame, as one
// msgpack array; on failure it tells which argument failed (from 1; 0 for
// the array's header). The generated adverbs pass a closure over their
// typed arguments (encodeArgs1, ...; wire.EncodeTyped for each), which
// the send path only calls: it stays on the adverb's stack, and no
// argument is boxed on the way to the frame.
type callArgs func(enc *msgpack.Encoder) (int, error)

// noArgs is the callArgs of an endpoint without arguments: an empty array.
func noArgs(enc *msgpack.Encoder) (int, error) { return 0, enc.EncodeArrayLen(0) }
