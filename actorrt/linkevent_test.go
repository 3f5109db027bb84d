package actorrt

import (
	"strings"
	"testing"
)

// FuzzParseLinkEvent: a link event from a buggy peer is refused or read
// as up, or as down with a printable cause of bounded length.
func FuzzParseLinkEvent(f *testing.F) {
	for _, s := range []string{"up", "down reset by the agent's host", "down ", "down \n", "upp", "down " + strings.Repeat("x", 600)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		up, cause, err := parseLinkEvent(b)
		switch {
		case err != nil:
		case up && cause != "":
			t.Fatalf("%q: up with a cause", b)
		case !up && (cause == "" || len(cause) > 512 || !printable(cause)):
			t.Fatalf("%q: down with cause %q", b, cause)
		}
	})
}
