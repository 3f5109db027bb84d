package dropnames

import (
	"slices"
	"testing"
)

// TestNames: All lists the kinds in order; Name names each, and a value
// past them says what it is.
func TestNames(t *testing.T) {
	type other uint8
	n := Names[other]{"a", "b"}
	if got := n.All(); !slices.Equal(got, []other{0, 1}) {
		t.Errorf("All() = %v", got)
	}
	for k, want := range map[other]string{0: "a", 1: "b", 2: "DropKind(2)", 255: "DropKind(255)"} {
		if got := n.Name(k); got != want {
			t.Errorf("Name(%d) = %q, want %q", k, got, want)
		}
	}
}
