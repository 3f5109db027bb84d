package logagg_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/monarch-go/monarch/logagg"
)

// The one color rule: a terminal, NO_COLOR unset or empty, TERM not dumb.
func TestColorFor(t *testing.T) {
	tty := openTerminal(t) // nil where there is none: those cases are skipped
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	regular, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	const unset = "\x00unset"
	tests := []struct {
		name    string
		f       *os.File
		noColor string
		term    string
		want    bool
	}{
		{"terminal", tty, unset, "xterm-256color", true},
		{"terminal, NO_COLOR empty", tty, "", "xterm-256color", true},
		{"terminal, NO_COLOR=1", tty, "1", "xterm-256color", false},
		{"terminal, NO_COLOR=0", tty, "0", "xterm-256color", false},
		{"terminal, TERM unset", tty, unset, unset, true},
		{"dumb terminal", tty, unset, "dumb", false},
		{"pipe", w, unset, "xterm-256color", false},
		{"regular file", regular, unset, "xterm-256color", false},
		{"nil file", nil, unset, "xterm-256color", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.f == nil && tt.name != "nil file" {
				t.Skip("no terminal to test with")
			}
			setenv(t, "NO_COLOR", tt.noColor, unset)
			setenv(t, "TERM", tt.term, unset)
			if got := logagg.ColorFor(tt.f); got != tt.want {
				t.Errorf("ColorFor = %v, want %v", got, tt.want)
			}
		})
	}
}

// setenv sets key to v for the test, or unsets it when v is unset.
func setenv(t *testing.T, key, v, unset string) {
	t.Setenv(key, "") // restored after the test
	if v == unset {
		os.Unsetenv(key)
		return
	}
	os.Setenv(key, v)
}
