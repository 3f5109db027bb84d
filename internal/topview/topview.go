// Package topview draws what `monarch top` shows of a running job: a
// snapshot of the job state feed (jobctl.JobState) as lines of text that
// fit a terminal of a given size. It is pure: no terminal, no clock, no
// I/O but the writer it is given; the command does the rest.
//
// # What it shows
//
// A header (the job, the snapshot's time, hosts up and gone, procs by
// state, supervision events), then sections: the hosts (state, age of the
// last heartbeat), each proc mesh (per proc: rank, host, pid, state, CPU
// and memory), each actor mesh (per member: rank, proc, host, state,
// calls sent and messages handled, with their rates), the last
// supervision events and the last log lines. Rates come from two
// snapshots: a proc's CPU% is its CPU seconds' growth over its figures'
// time; counts per second are their growth over the snapshots' times.
// Without an earlier snapshot (or when a count went down, as a restarted
// member's does) a rate is "-".
//
// # Fitting
//
// Every line is cut to the width (runes, ending in "…" when cut), and
// control characters of log lines and reasons are shown as spaces, so a
// line never moves the cursor. The height is shared: each section gets
// its title first; the mesh sections then share what is left, evenly,
// none getting more than it needs; the hosts, the events and the log
// lines share the rest, the newest events and lines kept. A section cut short ends with a line saying
// how many rows it left out; a title always says how many there are and
// how many failed.
package topview

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// Render writes the snapshot s as it fits a terminal of width columns and
// height lines (0 for either: no bound), with rates from prev, an earlier
// snapshot of the same job (nil: none). Lines end in "\n".
func Render(w io.Writer, s, prev *jobctl.JobState, width, height int) error {
	for _, l := range Lines(s, prev, width, height) {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// Lines is Render's lines, without their ends: at most height of them
// (when height > 0), none longer than width runes (when width > 0).
func Lines(s, prev *jobctl.JobState, width, height int) []string {
	if s == nil || height < 0 {
		return nil
	}
	r := rates{prev: prev, cur: s}
	if prev != nil && prev.Job == s.Job && s.At.After(prev.At) {
		r.dt = s.At.Sub(prev.At).Seconds()
	}
	var meshes []section
	hosts := procHosts(s)
	for i := range s.ProcMeshes {
		meshes = append(meshes, procSection(&s.ProcMeshes[i], &r))
	}
	for i := range s.ActorMeshes {
		meshes = append(meshes, memberSection(&s.ActorMeshes[i], &r, hosts))
	}
	all := append(append([]section{hostsSection(s)}, meshes...), eventsSection(s), logsSection(s))

	out := []string{header(s)}
	n := make([]int, len(all))
	for i, sec := range all {
		n[i] = sec.need()
	}
	if height > 0 {
		n = fit(all, height-1)
	}
	for i, sec := range all {
		if n[i] == 0 && i == 0 {
			break
		}
		if n[i] == 0 { // no room for this title and those after it
			out = append(out[:len(out)-1], fmt.Sprintf("… %d more sections: a taller terminal shows them", len(all)-i+1))
			break
		}
		out = append(out, sec.lines(n[i])...)
	}
	if height > 0 && len(out) > height {
		out = out[:height]
	}
	for i := range out {
		out[i] = cut(out[i], width)
	}
	return out
}

// header is the view's first line: the job at a glance.
func header(s *jobctl.JobState) string {
	up, gone := 0, 0
	for _, h := range s.Hosts {
		if h.State == "up" {
			up++
		} else {
			gone++
		}
	}
	procs := map[string]int{}
	n := 0
	for _, pm := range s.ProcMeshes {
		for _, p := range pm.Procs {
			procs[p.State]++
			n++
		}
	}
	events := fmt.Sprint(len(s.Events))
	if s.EventsDropped > 0 {
		events = fmt.Sprintf("%d (%d older dropped)", uint64(len(s.Events))+s.EventsDropped, s.EventsDropped)
	}
	return fmt.Sprintf("job %s  %s  hosts %d up, %d gone  procs %d%s  actor meshes %d  events %s  log lines %d",
		clean(s.Job), s.At.Local().Format("15:04:05"), up, gone, n, byState(procs, n, states...), len(s.ActorMeshes), events, s.LogLines)
}

// byState says how many of n are in each state, those of order first:
// " (3 running, 1 failed)", or "" for none.
func byState(count map[string]int, n int, order ...string) string {
	if n == 0 {
		return ""
	}
	var parts []string
	for _, st := range order {
		if count[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
		}
	}
	var others []string // states this view does not know, in a stable order
	for st := range count {
		if !slices.Contains(order, st) {
			others = append(others, st)
		}
	}
	slices.Sort(others)
	for _, st := range others {
		parts = append(parts, fmt.Sprintf("%d %s", count[st], orDash(st)))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// The states of procs and members, in the order a view lists them.
var states = []string{"running", "restarting", "failed", "stopped"}

// section is a block of the view: a title, a header of its table (if
// any) and rows.
type section struct {
	title string
	head  string // the table's column names; "" when there are no rows
	rows  []string
	// newest: the rows are oldest first and the last are kept when the
	// section is cut (events, log lines); else the first are.
	newest bool
}

// need is how many lines the section shows in full.
func (s section) need() int {
	if len(s.rows) == 0 {
		return 1
	}
	return 2 + len(s.rows)
}

// lines are the section's lines, in n lines at most (at least 1: the
// title); rows left out are counted on a line of their own.
func (s section) lines(n int) []string {
	out := []string{s.title}
	switch {
	case n >= s.need():
		if len(s.rows) == 0 {
			return out
		}
		return append(append(out, s.head), s.rows...)
	case n <= 1:
		return out
	case n <= 3: // a head with no row under it says nothing
		return append(out, "  … "+plural(len(s.rows), "row"))
	}
	shown := n - 3 // the title, the head, the line of rows left out
	if s.newest {
		out = append(out, s.head, fmt.Sprintf("  … %d earlier", len(s.rows)-shown))
		return append(out, s.rows[len(s.rows)-shown:]...)
	}
	out = append(append(out, s.head), s.rows[:shown]...)
	return append(out, fmt.Sprintf("  … %d more", len(s.rows)-shown))
}

// fit shares height lines among the sections all (the hosts, the
// meshes, the events, the log lines): how many each shows. Each title
// first, in order, while there is room (0: none); then the meshes, then
// the rest (see the package doc).
func fit(all []section, height int) []int {
	n := make([]int, len(all))
	left := height
	for i := range all {
		if left == 0 {
			return n
		}
		n[i], left = 1, left-1
	}
	meshes := len(all) - 3
	left = share(all[1:1+meshes], n[1:1+meshes], left)
	rest := append([]section{all[0]}, all[1+meshes:]...)
	restN := append([]int{n[0]}, n[1+meshes:]...)
	share(rest, restN, left)
	n[0] = restN[0]
	copy(n[1+meshes:], restN[1:])
	return n
}

// share gives the sections, which have n[i] lines each, up to left more
// lines, a line to each in turn, none more than it needs, and returns
// what is left.
func share(secs []section, n []int, left int) int {
	for grew := true; grew && left > 0; {
		grew = false
		for i, s := range secs {
			add := 1
			if n[i]+1 == 3 && s.need() > 3 { // 3 lines show no more than 2 (see lines)
				add = 2
			}
			if left < add || n[i]+add > s.need() {
				continue
			}
			n[i] += add
			left -= add
			grew = true
		}
	}
	return left
}

// table aligns rows of cells under their column names: the header line
// and the rows, each indented by two spaces.
func table(cols []string, rows [][]string) (string, []string) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+strings.Join(cols, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
	}
	tw.Flush()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return lines[0], lines[1:]
}

func hostsSection(s *jobctl.JobState) section {
	count := map[string]int{}
	var rows [][]string
	for _, h := range s.Hosts {
		count[h.State]++
		hb := "-"
		if !h.LastHeartbeat.IsZero() {
			hb = age(s.At.Sub(h.LastHeartbeat)) + " ago"
		}
		rows = append(rows, []string{orDash(h.Agent), orDash(h.Name), state(h.State, h.Reason), hb})
	}
	sec := section{title: fmt.Sprintf("HOSTS %d%s", len(s.Hosts), byState(count, len(s.Hosts), "up", "gone"))}
	if len(rows) > 0 {
		sec.head, sec.rows = table([]string{"HOST", "NAME", "STATE", "HEARTBEAT"}, rows)
	}
	return sec
}

func procSection(pm *jobctl.ProcMeshState, r *rates) section {
	count := map[string]int{}
	var rows [][]string
	for _, p := range pm.Procs {
		count[p.State]++
		cpu, rss := "-", "-"
		if !pm.Command && !p.FiguresAt.IsZero() && p.State == "running" { // an ended proc's are its last
			cpu, rss = r.cpu(&p), bytes(p.RSS)
		}
		pid := "-"
		if p.PID > 0 {
			pid = fmt.Sprint(p.PID)
		}
		rows = append(rows, []string{fmt.Sprint(p.Rank), orDash(p.Host), pid, clean(p.State), cpu, rss, clean(p.Proc), clean(p.Reason)})
	}
	kind := "proc mesh"
	if pm.Command {
		kind = "proc mesh of commands"
	}
	sec := section{title: fmt.Sprintf("%s: %s %s, %d procs%s", clean(pm.Name), kind, extent(pm.Extent), len(pm.Procs), byState(count, len(pm.Procs), states...))}
	if len(rows) > 0 {
		sec.head, sec.rows = table([]string{"RANK", "HOST", "PID", "STATE", "CPU%", "RSS", "PROC", "REASON"}, rows)
	}
	return sec
}

func memberSection(am *jobctl.ActorMeshState, r *rates, hosts map[string]string) section {
	count := map[string]int{}
	var rows [][]string
	for _, m := range am.Members {
		count[m.State]++
		pm := r.member(am.ID, m.Rank)
		var ps, ph uint64
		if pm != nil {
			ps, ph = pm.Sent, pm.Handled
		}
		rows = append(rows, []string{fmt.Sprint(m.Rank), orDash(m.Proc), orDash(hosts[m.Proc]), clean(m.State),
			fmt.Sprint(m.Sent), r.rate(m.Sent, ps, pm != nil), fmt.Sprint(m.Handled), r.rate(m.Handled, ph, pm != nil), clean(m.Reason)})
	}
	title := fmt.Sprintf("%s: actor mesh of %s %s, owner %s, %d members%s", clean(am.Name), orDash(am.Type), extent(am.Extent),
		orDash(am.Owner), len(am.Members), byState(count, len(am.Members), states...))
	if am.Stopped {
		title += ", stopped"
	}
	pa := r.mesh(am.ID)
	var ps, ph uint64
	if pa != nil {
		ps, ph = pa.Sent, pa.Handled
	}
	title += fmt.Sprintf("; sent %d (%s/s), handled %d (%s/s)", am.Sent, r.rate(am.Sent, ps, pa != nil), am.Handled, r.rate(am.Handled, ph, pa != nil))
	sec := section{title: title}
	if len(rows) > 0 && !am.Stopped { // a stopped mesh's members are all stopped: its title says it
		sec.head, sec.rows = table([]string{"RANK", "PROC", "HOST", "STATE", "SENT", "SENT/S", "HANDLED", "HANDLED/S", "REASON"}, rows)
	}
	return sec
}

func eventsSection(s *jobctl.JobState) section {
	sec := section{title: fmt.Sprintf("EVENTS %d, newest last", uint64(len(s.Events))+s.EventsDropped), newest: true}
	if len(s.Events) == 0 {
		sec.title = "EVENTS none"
		return sec
	}
	sec.head = "  TIME      EVENT"
	for _, e := range s.Events {
		sec.rows = append(sec.rows, "  "+e.At.Local().Format("15:04:05")+"  "+event(e))
	}
	return sec
}

// event says what e is, on one line.
func event(e jobctl.Event) string {
	var b strings.Builder
	b.WriteString(clean(e.Kind))
	if e.Mesh != "" {
		b.WriteString(" " + clean(e.Mesh))
		switch {
		case e.Rank >= 0:
			fmt.Fprintf(&b, "[%d]", e.Rank)
		case len(e.Ranks) > 0:
			fmt.Fprintf(&b, "%v", e.Ranks)
		}
	}
	if e.Proc != "" {
		b.WriteString(" on " + clean(e.Proc))
	}
	if e.Reason != "" {
		b.WriteString(": " + clean(e.Reason))
	}
	return b.String()
}

func logsSection(s *jobctl.JobState) section {
	sec := section{title: fmt.Sprintf("LOG %d lines, newest last, stderr marked !", s.LogLines), newest: true}
	if len(s.Logs) == 0 {
		sec.title = "LOG no lines yet"
		return sec
	}
	sec.head = "  TIME      PROC  LINE"
	for _, l := range s.Logs {
		mark := " "
		if l.Stream == "stderr" {
			mark = "!"
		}
		sec.rows = append(sec.rows, "  "+l.At.Local().Format("15:04:05")+"  "+clean(l.Proc)+" "+mark+" "+clean(l.Text))
	}
	return sec
}

// rates computes rates between two snapshots.
type rates struct {
	prev, cur *jobctl.JobState
	dt        float64 // seconds between them; 0: no rates
	procs     map[string]*jobctl.ProcState
	meshes    map[string]*jobctl.ActorMeshState
}

// cpu is p's CPU use since the earlier snapshot, in percent of one core.
func (r *rates) cpu(p *jobctl.ProcState) string {
	if r.dt == 0 {
		return "-"
	}
	if r.procs == nil {
		r.procs = map[string]*jobctl.ProcState{}
		for i := range r.prev.ProcMeshes {
			for j := range r.prev.ProcMeshes[i].Procs {
				q := &r.prev.ProcMeshes[i].Procs[j]
				r.procs[q.Proc] = q
			}
		}
	}
	q := r.procs[p.Proc]
	if q == nil || q.FiguresAt.IsZero() || !p.FiguresAt.After(q.FiguresAt) || p.CPUSeconds < q.CPUSeconds {
		return "-"
	}
	return fmt.Sprintf("%.1f", 100*(p.CPUSeconds-q.CPUSeconds)/p.FiguresAt.Sub(q.FiguresAt).Seconds())
}

// mesh is the actor mesh id in the earlier snapshot (nil: none).
func (r *rates) mesh(id string) *jobctl.ActorMeshState {
	if r.dt == 0 {
		return nil
	}
	if r.meshes == nil {
		r.meshes = map[string]*jobctl.ActorMeshState{}
		for i := range r.prev.ActorMeshes {
			r.meshes[r.prev.ActorMeshes[i].ID] = &r.prev.ActorMeshes[i]
		}
	}
	return r.meshes[id]
}

// member is member rank of actor mesh id in the earlier snapshot.
func (r *rates) member(id string, rank int) *jobctl.MemberState {
	m := r.mesh(id)
	if m == nil {
		return nil
	}
	for i := range m.Members {
		if m.Members[i].Rank == rank {
			return &m.Members[i]
		}
	}
	return nil
}

// rate is a count's growth per second from was (if known).
func (r *rates) rate(now, was uint64, known bool) string {
	if !known || r.dt == 0 || now < was {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(now-was)/r.dt)
}

// procHosts maps each proc of s to its host.
func procHosts(s *jobctl.JobState) map[string]string {
	m := map[string]string{}
	for _, pm := range s.ProcMeshes {
		for _, p := range pm.Procs {
			m[p.Proc] = p.Host
		}
	}
	return m
}

// extent is e as monarch prints extents: {hosts: 2, gpus: 2}.
func extent(e jobctl.Extent) string {
	parts := make([]string, len(e))
	for i, d := range e {
		parts[i] = fmt.Sprintf("%s: %d", clean(d.Name), d.Size)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// state is st, with the reason of a state that has one.
func state(st, reason string) string {
	if reason == "" {
		return clean(st)
	}
	return clean(st) + ": " + clean(reason)
}

// age is d, short: 350ms, 4.2s, 3m5s.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// bytes is n in binary units.
func bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f%ciB", v, "KMGTP"[i])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}

// clean is s on one line with no control characters: each becomes a
// space (a tab in a log line would break the columns; an escape would
// move the cursor), and so does invalid UTF-8.
func clean(s string) string {
	ok := true
	for _, c := range s {
		if c == utf8.RuneError || unicode.IsControl(c) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	return strings.Map(func(c rune) rune {
		if c == utf8.RuneError || unicode.IsControl(c) {
			return ' '
		}
		return c
	}, s)
}

// Line is s as a line of the view: control characters as spaces, cut to
// width runes (width <= 0: not cut).
func Line(s string, width int) string { return cut(clean(s), width) }

// cut is s in at most width runes (width <= 0: s), ending in "…" when
// cut.
func cut(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	rs := []rune(s)
	if width == 1 {
		return string(rs[:1])
	}
	return string(rs[:width-1]) + "…"
}

// plural is "1 row", "2 rows".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
