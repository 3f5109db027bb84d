package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/logagg"
)

// logsSelection checks the --host, --mesh, --rank and --stream filters
// against what the job's log holds: a selection that matches no line is an
// error that says which hosts, ranks and meshes the job has lines of, and
// how many lines its client wrote, not an empty output that looks like
// success; "no lines at all" is only for a job with none. (--since and --grep finding nothing is an answer,
// not a mistake.) In follow mode the check is made when the job has
// ended: hosts and ranks may come while it runs; interrupting a follow
// is never an error.
type logsSelection struct {
	filter  logagg.Filter
	matched bool                    // a line passed the host, rank and stream filters
	ranks   map[string]map[int]bool // host -> its ranks, as seen
	streams map[logagg.Stream]bool
	client  int      // the client program's lines, as seen
	order   []string // the hosts seen
	meshes  []string // the meshes seen, in order
}

func newLogsSelection(f logagg.Filter) *logsSelection {
	return &logsSelection{filter: f, ranks: map[string]map[int]bool{}, streams: map[logagg.Stream]bool{}}
}

// active reports whether there is anything to check.
func (s *logsSelection) active() bool {
	return len(s.filter.Hosts) > 0 || len(s.filter.Meshes) > 0 || len(s.filter.Ranks) > 0 || s.filter.Stream != 0
}

// take notes l and reports whether it passes the whole filter.
func (s *logsSelection) take(l logagg.Line) bool {
	if !s.matched {
		if l.Proc == logagg.ClientProc { // the client program is no host's rank
			s.client++
		} else {
			rs := s.ranks[l.Host]
			if rs == nil {
				rs = map[int]bool{}
				s.ranks[l.Host] = rs
				s.order = append(s.order, l.Host)
			}
			rs[l.Rank] = true
		}
		s.streams[l.Stream] = true
		if l.Mesh != "" && !slices.Contains(s.meshes, l.Mesh) && len(s.meshes) < maxMeshes {
			s.meshes = append(s.meshes, l.Mesh)
		}
		only := logagg.Filter{Hosts: s.filter.Hosts, Meshes: s.filter.Meshes, Ranks: s.filter.Ranks, Stream: s.filter.Stream}
		s.matched = only.Match(l)
	}
	return s.filter.Match(l)
}

// err is the error for a selection that matched nothing, or nil. running
// says the job may still write lines.
func (s *logsSelection) err(job string, running bool) error {
	if !s.active() || s.matched {
		return nil
	}
	what := "no lines"
	if s.filter.Stream != 0 {
		what = "no " + s.filter.Stream.String() + " lines"
	}
	if len(s.filter.Meshes) > 0 {
		what += " of " + plural("mesh", len(s.filter.Meshes)) + " " + strings.Join(s.filter.Meshes, ", ")
	}
	if len(s.filter.Hosts) > 0 {
		what += " from " + plural("host", len(s.filter.Hosts)) + " " + strings.Join(s.filter.Hosts, ", ")
	}
	if len(s.filter.Ranks) > 0 {
		what += " of " + plural("rank", len(s.filter.Ranks)) + " " + rankList(s.filter.Ranks)
	}
	more := ""
	if running {
		more = fmt.Sprintf(" (so far: it is still running; monarch logs -f %s waits for more)", job)
	}
	if len(s.order) == 0 && s.client == 0 {
		return fmt.Errorf("logs: %s; job %s has no lines at all%s", what, job, more)
	}
	return fmt.Errorf("logs: %s; %s%s", what, s.has(job), more)
}

// has says what the job's lines came from: hosts and their ranks, meshes,
// streams (for --stream) and the client's lines.
func (s *logsSelection) has(job string) string {
	has := fmt.Sprintf("job %s has no line of a proc", job)
	if len(s.order) > 0 {
		has = s.hosts(job)
	}
	if len(s.filter.Meshes) > 0 && len(s.order) > 0 { // "no line of a proc" said there is no mesh
		has += ", " + s.meshList()
	}
	if s.filter.Stream != 0 {
		var streams []string
		for _, st := range []logagg.Stream{logagg.Stdout, logagg.Stderr} {
			if s.streams[st] {
				streams = append(streams, st.String())
			}
		}
		has += ", lines on " + strings.Join(streams, " and ")
	}
	if len(s.filter.Meshes) == 0 && len(s.meshes) > 0 {
		has += ", " + s.meshList()
	}
	if s.client > 0 {
		has += fmt.Sprintf(", %d [client] %s", s.client, plural("line", s.client))
	}
	return has
}

// hosts is "job J has hosts h0 (ranks 0-1), ...": the first 20 hosts
// and their ranks.
func (s *logsSelection) hosts(job string) string {
	slices.SortFunc(s.order, hostCompare)
	const most = 20
	hosts := make([]string, 0, min(len(s.order), most))
	for _, h := range s.order[:min(len(s.order), most)] {
		rs := slices.Collect(maps.Keys(s.ranks[h]))
		hosts = append(hosts, fmt.Sprintf("%s (%s %s)", h, plural("rank", len(rs)), rankList(rs)))
	}
	has := fmt.Sprintf("job %s has %s %s", job, plural("host", len(s.order)), strings.Join(hosts, ", "))
	if len(s.order) > most {
		has += fmt.Sprintf(" and %d more", len(s.order)-most)
	}
	return has
}

// maxMeshes bounds the meshes a selection lists.
const maxMeshes = 100

// meshList says which meshes the job's lines came from.
func (s *logsSelection) meshList() string {
	if len(s.meshes) == 0 {
		return "no lines of a named mesh (a log of an older monarch)"
	}
	more := ""
	if len(s.meshes) == maxMeshes {
		more = " and maybe more"
	}
	return plural("mesh", len(s.meshes)) + " " + strings.Join(s.meshes, ", ") + more
}

func plural(word string, n int) string {
	switch {
	case n == 1:
		return word
	case strings.HasSuffix(word, "sh"):
		return word + "es"
	}
	return word + "s"
}

// rankList writes ranks as sorted ranges: 0-3, 5, 7-8.
func rankList(ranks []int) string {
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(rs[i]))
		} else {
			parts = append(parts, strconv.Itoa(rs[i])+"-"+strconv.Itoa(rs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// hostCompare orders host names with their numbers as numbers: h2
// before h10.
func hostCompare(a, b string) int {
	pa, na := splitNumber(a)
	pb, nb := splitNumber(b)
	if pa == pb && na >= 0 && nb >= 0 {
		return na - nb
	}
	return strings.Compare(a, b)
}

// splitNumber splits "node12" into "node" and 12; n is -1 without a
// trailing number.
func splitNumber(s string) (prefix string, n int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i == len(s) || len(s)-i > 9 {
		return s, -1
	}
	n, _ = strconv.Atoi(s[i:])
	return s[:i], n
}
