package dtensor

import (
	"maps"
	"slices"
)

// OpNames lists the op table, sorted, for the black-box tests that
// exercise every op.
func OpNames() []string { return slices.Sorted(maps.Keys(ops)) }

// Kept is how many ops m's outbox keeps, not sent yet.
func Kept(m *Mesh) int {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	return len(m.out)
}
