package launch

import (
	"slices"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"one host", "vm", []string{"vm"}},
		{"range", "h[1-2]", []string{"h1", "h2"}},
		{"zero padding and a lone number", "n[01-03,7],gpu5", []string{"n01", "n02", "n03", "n7", "gpu5"}},
		{"padding from the lower bound", "n[8-10]", []string{"n8", "n9", "n10"}},
		{"padding carried past 9", "n[08-10]", []string{"n08", "n09", "n10"}},
		{"several groups", "a[1-2]-b[3-4]", []string{"a1-b3", "a1-b4", "a2-b3", "a2-b4"}},
		{"text after the last group", "rack[1-2]-gpu", []string{"rack1-gpu", "rack2-gpu"}},
		{"group and plain name", "h[1-2],h3", []string{"h1", "h2", "h3"}},
		{"commas inside and outside", "a[1,3],b[2-3,5],c", []string{"a1", "a3", "b2", "b3", "b5", "c"}},
		{"group only", "[1-3]", []string{"1", "2", "3"}},
		{"single-value range", "h[5-5]", []string{"h5"}},
		{"blanks separate like commas", "h1 h2,\th3", []string{"h1", "h2", "h3"}},
		{"empty items skipped", ",h1,,h2,", []string{"h1", "h2"}},
		{"order kept, no sorting or dedup", "z,a,z", []string{"z", "a", "z"}},
		{"domain names", "node[1-2].cluster.org", []string{"node1.cluster.org", "node2.cluster.org"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandHostlist(tt.in)
			if err != nil {
				t.Fatalf("ExpandHostlist(%q): %v", tt.in, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ExpandHostlist(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExpandHostlistErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // the whole error
	}{
		{"empty", "", `hostlist "": no host names`},
		{"only separators", " , ", `hostlist " , ": no host names`},
		{"unclosed", "h[1-", `hostlist "h[1-": "[" at offset 1 is not closed`},
		{"stray close", "h1]", `hostlist "h1]": "]" at offset 2 without "["`},
		{"nested", "h[[1]]", `hostlist "h[[1]]": "[" at offset 2 inside brackets`},
		{"decreasing", "h[3-1]", `hostlist "h[3-1]": h[3-1]: range "3-1" goes down`},
		{"letters", "h[a-b]", `hostlist "h[a-b]": h[a-b]: range "a-b": want a number or lo-hi`},
		{"empty brackets", "h[]", `hostlist "h[]": h[]: empty brackets`},
		{"empty range", "h[1,,2]", `hostlist "h[1,,2]": h[1,,2]: empty range in [1,,2]`},
		{"open range", "h[1-]", `hostlist "h[1-]": h[1-]: range "1-": want a number or lo-hi`},
		{"negative", "h[-1]", `hostlist "h[-1]": h[-1]: range "-1": want a number or lo-hi`},
		{"blank in brackets", "h[1, 2]", `hostlist "h[1, 2]": h[1, 2]: range " 2": want a number or lo-hi`},
		{"too many in one range", "n[0-1000000]", `hostlist "n[0-1000000]": expands to more than 1000000 names`},
		{"too many as a product", "a[1-1000]b[1-1001]", `hostlist "a[1-1000]b[1-1001]": expands to more than 1000000 names`},
		{"too many in total", "a[1-600000],b[1-600000]", `hostlist "a[1-600000],b[1-600000]": expands to more than 1000000 names`},
		{"huge range", "n[0-18446744073709551615]", `hostlist "n[0-18446744073709551615]": expands to more than 1000000 names`},
		{"number overflow", "n[99999999999999999999]", `hostlist "n[99999999999999999999]": n[99999999999999999999]: range "99999999999999999999": want a number or lo-hi`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpandHostlist(tt.in)
			if err == nil {
				t.Fatalf("ExpandHostlist(%q) = %q, want error %s", tt.in, got, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("ExpandHostlist(%q):\n got %s\nwant %s", tt.in, err, tt.want)
			}
		})
	}
}

// TestExpandHostlistAtBound: exactly the bound is allowed.
func TestExpandHostlistAtBound(t *testing.T) {
	got, err := ExpandHostlist("n[1-1000000]")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxHostlistNames || got[0] != "n1" || got[len(got)-1] != "n1000000" {
		t.Errorf("%d names, %s .. %s", len(got), got[0], got[len(got)-1])
	}
}
