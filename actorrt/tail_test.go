package actorrt

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestStderrTail: a proc's tail keeps its last MaxTail lines, oldest
// first, each cut at tailLine bytes.
func TestStderrTail(t *testing.T) {
	var nilTail *stderrTail
	nilTail.add("x") // a proc past the bound of tails: nothing kept
	if nilTail.get() != nil {
		t.Error("a nil tail has lines")
	}
	tl := &stderrTail{}
	if tl.get() != nil {
		t.Error("an empty tail has lines")
	}
	for i := range 3 {
		tl.add(fmt.Sprint(i))
	}
	if got := tl.get(); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("3 lines: %q", got)
	}
	for i := 3; i < MaxTail+7; i++ {
		tl.add(fmt.Sprint(i))
	}
	got := tl.get()
	if len(got) != MaxTail || got[0] != "7" || got[MaxTail-1] != fmt.Sprint(MaxTail+6) {
		t.Errorf("%d lines: %q", MaxTail+7, got)
	}
	tl.add(strings.Repeat("é", tailLine)) // cut inside a rune
	last := tl.get()[MaxTail-1]
	if len(last) > tailLine+4 || !strings.HasSuffix(last, " …") || !strings.HasPrefix(last, "éé") {
		t.Errorf("a long line kept as %d bytes: %q", len(last), last[max(0, len(last)-10):])
	}
}
