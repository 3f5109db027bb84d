package launch

import (
	"regexp"
	"strings"
	"testing"
)

// TestProgressShowsTrueProcCount: the last "procs up" line before the
// job's end line is the count that came up, whether the procs came up
// before every host had (then their count follows "hosts up 2/2") or in
// a burst the job ends within (the line the burst left for later is
// printed before the end line).
func TestProgressShowsTrueProcCount(t *testing.T) {
	lastProcs := regexp.MustCompile(`monarch: procs up (\d+) \(`)
	for _, tt := range []struct {
		name    string
		updates [][2]int // hosts, procs
		want    string
	}{
		{"procs before the last host", [][2]int{{1, 0}, {1, 1}, {1, 2}, {2, 2}}, "2"},
		{"a burst the job ends in", [][2]int{{1, 0}, {2, 0}, {2, 1}, {2, 2}, {2, 3}}, "3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			p := newProgress(&b, "j1", "", "local", 2)
			for _, u := range tt.updates {
				p.update(u[0], u[1])
			}
			p.done("done")
			out := b.String()
			m := lastProcs.FindAllStringSubmatch(out, -1)
			if len(m) == 0 || m[len(m)-1][1] != tt.want || !strings.Contains(out, "and "+tt.want+" procs had come up") {
				t.Errorf("want the last procs line to say %s:\n%s", tt.want, out)
			}
			if strings.LastIndex(out, "procs up") > strings.Index(out, "ended:") {
				t.Errorf("a procs line after the end line:\n%s", out)
			}
		})
	}
}
