// Package wirecheck is the wire check: it tells why values of a Go type
// would not survive a trip through msgpack (vmihailenco/msgpack/v5) as
// the SDK uses it, so that actorrt.Register and Remote refuse the type
// when the endpoint is registered rather than lose a value later.
//
// Most such losses are silent: msgpack skips an unexported field, so it
// arrives as zero; it inlines embedded structs and keeps one of two
// fields of the same name; it decodes a pointer map key to a new pointer.
// The rules follow what msgpack does, type by type, so that a type the
// check accepts arrives as sent.
//
// The types a caller encodes by codecs of its own (registered with
// msgpack, not found by their methods) it names through Own; the types
// given a codec by msgpack.Register it records with Registered.
package wirecheck
