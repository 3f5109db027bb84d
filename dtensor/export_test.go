package dtensor

import (
	"maps"
	"slices"
)

// OpNames lists the op table, sorted, for the black-box tests that
// exercise every op.
func OpNames() []string { return slices.Sorted(maps.Keys(ops)) }
