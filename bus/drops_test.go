package bus_test

import (
	"slices"
	"testing"

	"github.com/monarch-go/monarch/bus"
)

// TestDropKindNames: every kind has its name, in order; a value past them
// says what it is.
func TestDropKindNames(t *testing.T) {
	var names []string
	for _, k := range bus.DropKinds() {
		names = append(names, k.String())
	}
	if want := []string{"batch", "chunk", "chunk-expired", "chunk-limit", "header"}; !slices.Equal(names, want) {
		t.Errorf("kinds %q, want %q", names, want)
	}
	type other uint8
	n := bus.DropKindNames[other]{"a", "b"}
	if got := n.All(); !slices.Equal(got, []other{0, 1}) {
		t.Errorf("All() = %v", got)
	}
	for k, want := range map[other]string{0: "a", 1: "b", 2: "DropKind(2)", 255: "DropKind(255)"} {
		if got := n.Name(k); got != want {
			t.Errorf("Name(%d) = %q, want %q", k, got, want)
		}
	}
}
