package didyoumean

import (
	"slices"
	"testing"
)

func TestClosest(t *testing.T) {
	known := []string{"hosts", "user", "port", "identity_file", "connect_timeout", "parallel"}
	tests := []struct{ in, want string }{
		{"prot", "port"},
		{"Port", "port"},
		{"host", "hosts"},
		{"timeout", "connect_timeout"},
		{"identity", "identity_file"},
		{"zzz", ""},
		{"a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Closest(tt.in, known); got != tt.want {
				t.Errorf("Closest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzClosest: any word, however long or strange, gets one of the known
// words or "", and a known word is its own suggestion.
func FuzzClosest(f *testing.F) {
	known := []string{"hosts", "detach", "status", "connect_timeout", "x"}
	for _, s := range []string{"", "detatch", "stauts", "\xff\xfe", "timeout", "HOSTS", "connect_timeout_connect_timeout_connect_timeout"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		got := Closest(k, known)
		if got != "" && !slices.Contains(known, got) {
			t.Fatalf("Closest(%q) = %q, not a known word", k, got)
		}
		if slices.Contains(known, k) && got != k {
			t.Fatalf("Closest(%q) = %q, want itself", k, got)
		}
	})
}
