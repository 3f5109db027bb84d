package bus_test

import (
	"slices"
	"testing"

	"github.com/monarch-go/monarch/bus"
)

// TestDropKindNames: every kind has its name, in order.
func TestDropKindNames(t *testing.T) {
	var names []string
	for _, k := range bus.DropKinds() {
		names = append(names, k.String())
	}
	if want := []string{"batch", "chunk", "chunk-expired", "chunk-limit", "header"}; !slices.Equal(names, want) {
		t.Errorf("kinds %q, want %q", names, want)
	}
}
