package actorrt

import (
	"slices"
	"testing"
)

// TestVouchers: who may vouch for an id is who newProcID says started
// it: the proc it extends (P-N), the agent of its host key (K.L-N), the
// client for an agent; an id no proc of the job is given has no one.
func TestVouchers(t *testing.T) {
	for id, want := range map[string][]string{
		"c-1":      {"c"},
		"c-1-2":    {"c-1"},
		"h3.c-5":   {"h3"},
		"h3.c-5-1": {"h3.c-5", "h3"}, // started by h3.c-5 on its host, or by h3 for c-5
		"c-3.c-7":  {"c-3"},          // agent c-3, for the client
		"h2":       {"c"},
		"c":        nil,
		"fake-1":   nil,
		"stranger": nil,
		"x.y-1":    nil,
		"c-1x":     nil,
	} {
		if got := vouchers(id); !slices.Equal(got, want) {
			t.Errorf("vouchers(%q) = %q, want %q", id, got, want)
		}
	}
}
