package wire

import (
	"slices"
	"testing"
)

// TestDropKindNames: every kind has its name, in order (the names the
// job state feed and the metrics report drops by).
func TestDropKindNames(t *testing.T) {
	var names []string
	for _, k := range DropKinds() {
		names = append(names, k.String())
	}
	if want := []string{"frame", "kind", "region", "body", "ids", "op", "sender", "args", "payload"}; !slices.Equal(names, want) {
		t.Errorf("kinds %q, want %q", names, want)
	}
	if got := numDropKinds.String(); got != "DropKind(9)" {
		t.Errorf("past the kinds: %q", got)
	}
}
