package actorrt

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/jobview"
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

// TestFailureOf: what a client reports for each way it can fail.
func TestFailureOf(t *testing.T) {
	c := &client{counts: jobview.NewCounts(func(jobview.CountsNow) {})}
	c.counts.Up([]byte("c-3 node7"))
	c.counts.Gone("c-3") // a failure is often told after its proc's end
	long := make([]string, MaxTail+5)
	for i := range long {
		long[i] = fmt.Sprint(i)
	}
	for _, tt := range []struct {
		name string
		err  error
		code int
		want *Failure
	}{
		{"success", nil, 0, nil},
		{"spmd", &ExitError{Code: 1, Failure: &Failure{Summary: "rank 3 on h2 exited with status 1", Rank: 3, Tail: long}}, 1,
			&Failure{Summary: "rank 3 on h2 exited with status 1", Rank: 3, Tail: long[5:]}},
		{"mesh failure", fmt.Errorf("wrapped: %w", &MeshFailure{Mesh: "gen", ActorID: "gen[1]", Proc: "c-3", Reason: "boom", Base: 1}), 1,
			&Failure{Summary: "actor gen[1] of mesh gen on node7 failed: boom", Mesh: "gen", Rank: 1, Host: "node7"}},
		{"error", fmt.Errorf("no data"), 1, &Failure{Summary: "no data", Rank: -1, Exit: 1}},
		{"status", &ExitError{Code: 4}, 4, &Failure{Summary: "exited with status 4", Rank: -1, Exit: 4}},
	} {
		got := c.failureOf(tt.err, tt.code)
		switch {
		case got == nil || tt.want == nil:
			if got != tt.want {
				t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
			}
		case got.Summary != tt.want.Summary || got.Mesh != tt.want.Mesh || got.Rank != tt.want.Rank || got.Host != tt.want.Host ||
			got.Exit != tt.want.Exit || !slices.Equal(got.Tail, tt.want.Tail):
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
