package logagg_test

import (
	"strings"
	"testing"

	"github.com/monarch-go/monarch/logagg"
)

func TestFormat(t *testing.T) {
	l := out(3, "step 100 loss=0.42")
	e := errLine(3, "CUDA error")
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"line", logagg.FormatLine(l, false), "[3] step 100 loss=0.42"},
		{"stderr line", logagg.FormatLine(e, false), "[3] CUDA error"},
		{"empty text", logagg.FormatLine(out(0, ""), false), "[0] "},
		{"negative rank", logagg.FormatLine(out(-1, "x"), false), "[-1] x"},
		{"group of one", logagg.FormatGroup(logagg.Group{Count: 1, First: l, Ranks: 1}, false), "[3] step 100 loss=0.42"},
		{"group", logagg.FormatGroup(logagg.Group{Count: 37, First: l, Ranks: 8}, false), "[37 similar log lines] [3] step 100 loss=0.42"},
		{"color line", logagg.FormatLine(l, true), "\x1b[34m[3]\x1b[0m step 100 loss=0.42"},
		{"color stderr", logagg.FormatLine(e, true), "\x1b[31m[3]\x1b[0m CUDA error"},
		{"color group", logagg.FormatGroup(logagg.Group{Count: 2, First: e, Ranks: 2}, true), "\x1b[2m[2 similar log lines]\x1b[0m \x1b[31m[3]\x1b[0m CUDA error"},
		{"color negative rank", logagg.FormatLine(out(-7, "x"), true)[:2], "\x1b["},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// Neighbouring ranks get different colors, none of them stderr's red, and
// the text is never touched by the coloring.
func TestFormatRankColors(t *testing.T) {
	prefix := func(r int) string {
		s := logagg.FormatLine(out(r, "x"), true)
		return s[:strings.IndexByte(s, 'm')+1]
	}
	for r := range 16 {
		if prefix(r) == prefix(r+1) {
			t.Errorf("ranks %d and %d share color %q", r, r+1, prefix(r))
		}
		if prefix(r) == "\x1b[31m" {
			t.Errorf("rank %d is red", r)
		}
		if s := logagg.FormatLine(out(r, "x"), true); !strings.HasSuffix(s, "\x1b[0m x") {
			t.Errorf("rank %d: %q", r, s)
		}
	}
}
