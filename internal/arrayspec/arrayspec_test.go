package arrayspec

import (
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
)

func seq(first, last, step int) []int {
	var s []int
	for i := first; i <= last; i += step {
		s = append(s, i)
	}
	return s
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   []int
		limit  int
		render string
	}{
		{"0-15", seq(0, 15, 1), 0, "0-15"},
		{"1,3,7", []int{1, 3, 7}, 0, "1,3,7"},
		{"0-15:2", seq(0, 15, 2), 0, "0-14:2"},
		{"0-15:4", []int{0, 4, 8, 12}, 0, "0-12:4"},
		{"0-15%4", seq(0, 15, 1), 4, "0-15%4"},
		{"0-3,8,10-20:5", []int{0, 1, 2, 3, 8, 10, 15, 20}, 0, "0-3,8,10-20:5"},
		{"7", []int{7}, 0, "7"},
		{"0", []int{0}, 0, "0"},
		{"1000", []int{1000}, 0, "1000"},
		{"5-5", []int{5}, 0, "5"},
		{"0-3,2-5", seq(0, 5, 1), 0, "0-5"}, // overlaps merge, as sbatch's bitmap does
		{"3,1,3", []int{1, 3}, 0, "1,3"},    // sorted, duplicates dropped
		{"0-1000%1", seq(0, 1000, 1), 1, "0-1000%1"},
		{"0-9:20", []int{0}, 0, "0"}, // a step past the range keeps its start
		{"007", []int{7}, 0, "7"},
	} {
		sp, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(sp.Indices, tc.want) || sp.Limit != tc.limit {
			t.Errorf("Parse(%q) = %v %%%d, want %v %%%d", tc.in, sp.Indices, sp.Limit, tc.want, tc.limit)
		}
		if got := sp.String(); got != tc.render {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got, tc.render)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `array "": no indices`},
		{"%4", `array "%4": no indices`},
		{"0-15%0", `%0: the limit after % must be a number of tasks >= 1`},
		{"0-15%", `the limit after % must be`},
		{"0-15%x", `%x: the limit after %`},
		{"0-15:0", `part "0-15:0": step "0" must be a number >= 1`},
		{"0-15:-2", `step "-2" must be a number >= 1`},
		{"3:2", `part "3:2": a step needs a range`},
		{"5-3", `part "5-3": range runs backwards (5 > 3)`},
		{"0-1001", `part "0-1001": index 1001 is past the largest, 1000 (MaxArraySize 1001)`},
		{"0-4000000000", `index 4000000000 is past the largest, 1000`},
		{"0-99999999999999999999999", `index 99999999999999999999999 is past the largest`},
		{"-1", `part "-1": index "" is not a number`},
		{"1,,3", `part "": index "" is not a number`},
		{"1,3,", `part "": index "" is not a number`},
		{"a-b", `part "a-b": index "a" is not a number`},
		{"0-+5", `index "+5" is not a number`},
		{" 1", `index " 1" is not a number`},
		{"1-2-3", `index "2-3" is not a number`},
		{"1%2%3", `%2%3: the limit`},
		{strings.Repeat("x", 100), `array "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...": part "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...": index "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..." is not a number`},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestParseMax(t *testing.T) {
	sp, err := ParseMax("0-4%2", 5)
	if err != nil || !slices.Equal(sp.Indices, seq(0, 4, 1)) || sp.Limit != 2 {
		t.Fatalf("ParseMax(0-4%%2, 5) = %v, %v", sp, err)
	}
	if _, err := ParseMax("5", 5); err == nil || !strings.Contains(err.Error(), "past the largest, 4 (MaxArraySize 5)") {
		t.Fatalf("ParseMax(5, 5) = %v, want past the largest", err)
	}
	if _, err := ParseMax("0", 0); err == nil {
		t.Fatal("ParseMax with size 0: no error")
	}
}

// TestParseHugeAllocates: a range far past the bound is refused before
// anything its size is allocated.
func TestParseHugeAllocates(t *testing.T) {
	if n := alloc.By(func() { _, _ = Parse("0-4000000000") }); n > 16<<10 {
		t.Errorf("Parse(0-4000000000) allocated %d bytes, want at most 16 KiB", n)
	}
}

// TestStringRoundTrip: every rendering parses back to the same spec.
func TestStringRoundTrip(t *testing.T) {
	for _, in := range []string{"0-15", "1,3,7", "0-15:2", "0-3,8,10-20:5%3", "0,2,3,5,7,9", "1,2,4,8,16,32%1"} {
		sp, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(sp.String())
		if err != nil || !slices.Equal(back.Indices, sp.Indices) || back.Limit != sp.Limit {
			t.Errorf("%q renders as %q which parses to %v, %v", in, sp.String(), back, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-15", "1,3,7", "0-15:2", "0-3,8,10-20:5", "0-15%4", "0-4000000000",
		"5-3", "0-15:0", "3:2", "1,,3", "%4", "1%2%3", "0-99999999999999999999", "0-1000%1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var sp Spec
		var err error
		// The bitmap and the indices are bounded by MaxArraySize and the
		// error quotes at most 40 bytes of the input.
		if n, most := alloc.By(func() { sp, err = Parse(s) }), uint64(64<<10); n > most {
			t.Fatalf("Parse(%q) allocated %d bytes, want at most %d", s, n, most)
		}
		if err != nil {
			return
		}
		if len(sp.Indices) == 0 || len(sp.Indices) > MaxArraySize || sp.Limit < 0 {
			t.Fatalf("Parse(%q) = %v", s, sp)
		}
		if !slices.IsSorted(sp.Indices) || len(slices.Compact(slices.Clone(sp.Indices))) != len(sp.Indices) {
			t.Fatalf("Parse(%q): indices not sorted and distinct: %v", s, sp.Indices)
		}
		back, err := Parse(sp.String())
		if err != nil || !slices.Equal(back.Indices, sp.Indices) || back.Limit != sp.Limit {
			t.Fatalf("Parse(%q) renders as %q which parses to %v, %v", s, sp.String(), back, err)
		}
	})
}
