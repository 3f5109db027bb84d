// Package dropnames names the kinds of an enumeration of dropped
// messages: bus's (what a Conn drops) and the runtime's (internal/wire:
// malformed frames a receiver drops after the Conn handed them over).
// One definition of String and of the list of kinds serves both.
package dropnames

import "fmt"

// Names holds the name of each kind K, numbered from 0. Made from an
// array of the enumeration's length (as `(&[numKinds]string{...})[:]`),
// a kind without a name does not compile.
type Names[K ~uint8] []string

// Name is k's name, or "DropKind(n)" past the names.
func (n Names[K]) Name(k K) string {
	if int(k) < len(n) {
		return n[k]
	}
	return fmt.Sprintf("DropKind(%d)", uint8(k))
}

// All lists every kind, in order.
func (n Names[K]) All() []K {
	out := make([]K, len(n))
	for i := range out {
		out[i] = K(i)
	}
	return out
}
