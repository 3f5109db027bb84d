package jobctl

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OpStacks asks the job's client for goroutine stacks: a StacksRequest,
// answered by a StacksAnswer.
const OpStacks = "stacks"

// Selection selects procs of a job: those of every listed proc mesh,
// rank (in its proc mesh) and host; an empty list selects all. With
// nothing selected, the client comes too.
type Selection struct {
	Meshes []string `json:"meshes,omitempty"`
	Ranks  []int    `json:"ranks,omitempty"`
	Hosts  []string `json:"hosts,omitempty"`
}

// Empty reports whether s selects nothing in particular: every proc and
// the client.
func (s Selection) Empty() bool { return len(s.Meshes)+len(s.Ranks)+len(s.Hosts) == 0 }

// StacksRequest selects the procs whose stacks are wanted.
type StacksRequest struct {
	Selection
	// Timeout bounds the wait for the procs' answers; a proc that has not
	// answered then is listed as such.
	Timeout time.Duration `json:"timeout"`
}

// StacksBound is the bound of an OpStacks request with body: its Timeout
// and a margin.
func StacksBound(body json.RawMessage) time.Duration {
	var r StacksRequest
	if json.Unmarshal(body, &r) != nil || r.Timeout <= 0 {
		return 0
	}
	return r.Timeout + 5*time.Second
}

// StacksAnswer is the stacks of the selected procs, in mesh and rank
// order, the client first.
type StacksAnswer struct {
	Job   string       `json:"job"`
	Procs []ProcStacks `json:"procs"`
}

// ProcInfo is a proc asked, and why it gave no answer if it did not.
type ProcInfo struct {
	Proc string `json:"proc"` // its id: c-3, h1-4, or "c" for the client
	Host string `json:"host"`
	Mesh string `json:"mesh"` // its proc mesh's name; "" for the client
	Rank int    `json:"rank"` // its rank in its proc mesh; -1 for the client
	// Missing says why there is no answer: a command proc, a proc that
	// ended, or one that did not answer in time. "" when there is.
	Missing string `json:"missing,omitempty"`
}

// ProcStacks is what one proc answered, or why it did not.
type ProcStacks struct {
	ProcInfo
	// Goroutines is the proc's goroutine profile (runtime/pprof
	// "goroutine", debug=2).
	Goroutines string       `json:"goroutines,omitempty"`
	Actors     []ActorState `json:"actors,omitempty"`
}

// Label names the proc for people: "client", "workers 3".
func (p *ProcInfo) Label() string {
	if p.Rank < 0 {
		return "client"
	}
	if p.Mesh == "" {
		return "rank " + strconv.Itoa(p.Rank)
	}
	return p.Mesh + " " + strconv.Itoa(p.Rank)
}

// ActorState is one actor of a proc and a call it runs now: an actor
// running several calls (its concurrent endpoints') has one for each.
type ActorState struct {
	Actor    string    `json:"actor"`              // blockers[2]
	Endpoint string    `json:"endpoint,omitempty"` // "" when idle
	Since    time.Time `json:"since,omitzero"`     // when the endpoint was called
}

// StackGroup is goroutines with the same stack, folded across procs.
type StackGroup struct {
	State string // the goroutine's state: "select", "chan receive", "running"
	Stack string // the frames, argument values masked
	// Procs has an index into the answer's Procs for each proc that has
	// such goroutines, in order, and Counts how many each has.
	Procs  []int
	Counts []int
}

// Goroutines is how many goroutines the group has in all.
func (g *StackGroup) Goroutines() int {
	n := 0
	for _, c := range g.Counts {
		n += c
	}
	return n
}

var (
	goroutineHeader = regexp.MustCompile(`^goroutine \d+(?: gp=\S+ m=\S+(?: mp=\S+)?)? \[([^\]]*)\]:$`)
	// Wait times and the like: "chan receive, 5 minutes", "select, locked to thread".
	waitTime  = regexp.MustCompile(`, \d+ minutes?`)
	inGorout  = regexp.MustCompile(` in goroutine \d+$`)
	callArgs  = regexp.MustCompile(`\([^()]*\)$`) // argument values, which differ
	frameAddr = regexp.MustCompile(` fp=0x[0-9a-f]+ sp=0x[0-9a-f]+ pc=0x[0-9a-f]+$`)
)

// Group folds the goroutines of every proc of a by their stacks: the
// goroutine's id, how long it has waited and the values of its arguments
// are masked, so that the same code blocked in the same place is one
// group. Groups running an actor's endpoint come first (the program's own
// code, where a hang usually is), then the rest; each part in order of the
// procs sharing them (most first), then of goroutines, then of their text.
func Group(a *StacksAnswer) []StackGroup {
	index := map[string]int{}
	var groups []StackGroup
	for pi := range a.Procs {
		for _, g := range splitGoroutines(a.Procs[pi].Goroutines) {
			key := g.state + "\n" + g.stack
			gi, ok := index[key]
			if !ok {
				gi = len(groups)
				index[key] = gi
				groups = append(groups, StackGroup{State: g.state, Stack: g.stack})
			}
			sg := &groups[gi]
			if n := len(sg.Procs); n > 0 && sg.Procs[n-1] == pi {
				sg.Counts[n-1]++
			} else {
				sg.Procs, sg.Counts = append(sg.Procs, pi), append(sg.Counts, 1)
			}
		}
	}
	slices.SortStableFunc(groups, func(x, y StackGroup) int {
		if ex, ey := inEndpoint(x.Stack), inEndpoint(y.Stack); ex != ey {
			if ex {
				return -1
			}
			return 1
		}
		if d := len(y.Procs) - len(x.Procs); d != 0 {
			return d
		}
		if d := y.Goroutines() - x.Goroutines(); d != 0 {
			return d
		}
		return strings.Compare(x.Stack, y.Stack)
	})
	return groups
}

// inEndpoint reports whether a stack runs an actor's endpoint.
func inEndpoint(stack string) bool {
	return strings.Contains(stack, "/actorrt.(*actor).invoke(")
}

type goroutine struct{ state, stack string }

// splitGoroutines reads a debug=2 goroutine profile, masking what differs
// between identical goroutines.
func splitGoroutines(text string) []goroutine {
	var out []goroutine
	for _, block := range strings.Split(strings.TrimSpace(text), "\n\n") {
		lines := strings.Split(block, "\n")
		m := goroutineHeader.FindStringSubmatch(lines[0])
		if m == nil {
			continue
		}
		state := waitTime.ReplaceAllString(m[1], "")
		var b strings.Builder
		for _, l := range lines[1:] {
			l = frameAddr.ReplaceAllString(l, "")
			if !strings.HasPrefix(l, "\t") {
				l = inGorout.ReplaceAllString(l, "")
				l = callArgs.ReplaceAllString(l, "(...)")
			}
			b.WriteString(l)
			b.WriteByte('\n')
		}
		out = append(out, goroutine{state: state, stack: b.String()})
	}
	return out
}

// Format prints a as `monarch stacks` does: each group of identical
// goroutines once, headed by the procs that have it; then what each proc's
// actors run now (and for how long, at now); then the procs without
// stacks and why.
func Format(w io.Writer, a *StacksAnswer, now time.Time) error {
	answered := 0
	for i := range a.Procs {
		if a.Procs[i].Missing == "" {
			answered++
		}
	}
	fmt.Fprintf(w, "job %s: stacks of %d of %d procs\n", a.Job, answered, len(a.Procs))
	for _, g := range Group(a) {
		procs := make([]*ProcInfo, len(g.Procs))
		for i, pi := range g.Procs {
			procs[i] = &a.Procs[pi].ProcInfo
		}
		each := ""
		if n := g.Goroutines(); n == len(g.Procs) {
			each = "1 goroutine each"
		} else if slices.Min(g.Counts) == slices.Max(g.Counts) {
			each = fmt.Sprintf("%d goroutines each", g.Counts[0])
		} else {
			each = fmt.Sprintf("%d goroutines", n)
		}
		fmt.Fprintf(w, "\n== %s: %s [%s]\n", procList(procs), each, g.State)
		io.WriteString(w, g.Stack)
	}
	printedActors := false
	for i := range a.Procs {
		p := &a.Procs[i]
		if p.Missing != "" {
			continue
		}
		for _, as := range p.Actors {
			if as.Endpoint == "" {
				continue
			}
			if !printedActors {
				fmt.Fprintf(w, "\n== running actors\n")
				printedActors = true
			}
			fmt.Fprintf(w, "%s (%s on %s): %s %s for %v\n", p.Label(), p.Proc, p.Host, as.Actor, as.Endpoint, now.Sub(as.Since).Round(time.Millisecond))
		}
	}
	missing := make([]*ProcInfo, 0, len(a.Procs))
	for i := range a.Procs {
		missing = append(missing, &a.Procs[i].ProcInfo)
	}
	FormatMissing(w, "procs without stacks", missing)
	return nil
}

// FormatMissing prints, under "== title", each of procs that gave no
// answer and why; nothing if all did.
func FormatMissing(w io.Writer, title string, procs []*ProcInfo) {
	first := true
	for _, p := range procs {
		if p.Missing == "" {
			continue
		}
		if first {
			fmt.Fprintf(w, "\n== %s\n", title)
			first = false
		}
		fmt.Fprintf(w, "%s (%s on %s): %s\n", p.Label(), p.Proc, p.Host, p.Missing)
	}
}

// procList names procs compactly: "client", "workers 0-3,5 (5 procs)",
// "client, workers 0-3 (5 procs)".
func procList(procs []*ProcInfo) string {
	var parts []string
	for i := 0; i < len(procs); {
		j := i
		var ranks []int
		for ; j < len(procs) && procs[j].Mesh == procs[i].Mesh && (procs[j].Rank < 0) == (procs[i].Rank < 0); j++ {
			ranks = append(ranks, procs[j].Rank)
		}
		switch {
		case procs[i].Rank < 0:
			parts = append(parts, "client")
		case procs[i].Mesh == "":
			parts = append(parts, "ranks "+rankRanges(ranks))
		default:
			parts = append(parts, procs[i].Mesh+" "+rankRanges(ranks))
		}
		i = j
	}
	s := strings.Join(parts, ", ")
	if len(procs) > 1 {
		s += fmt.Sprintf(" (%d procs)", len(procs))
	}
	return s
}

// rankRanges writes ranks (ascending) as ranges: 0-3,5,7-8.
func rankRanges(ranks []int) string {
	var b strings.Builder
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ranks[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ranks[j]))
		}
		i = j + 1
	}
	return b.String()
}
