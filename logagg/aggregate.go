package logagg

// Group is a set of similar lines of one stream seen in one window.
type Group struct {
	Count int  // lines in the group
	First Line // the first of them, the one printed
	Ranks int  // distinct ranks among them
}

// Aggregator groups similar lines: lines of the same stream whose
// [Template]s are equal. It runs no timers: its owner calls Flush at the
// end of each window (the client every few seconds, `monarch logs
// --aggregate` per window of the lines' timestamps).
//
// The cost of Add is linear in the length of the line and does not grow
// with the number of groups; a line of a group already seen allocates
// nothing. It is not safe for concurrent use.
type Aggregator struct {
	index   map[string]int // stream byte + template → position in groups
	groups  []groupState
	pending int
	key     []byte // reused to build keys
}

// bigWindow is the number of groups above which Flush lets the memory of
// a window go instead of reusing it.
const bigWindow = 4096

type groupState struct {
	Group
	lastRank int
	seen     []uint64         // ranks 0..maxBitRank, a bit each; made when a second rank appears
	others   map[int]struct{} // any other ranks
}

// maxBitRank bounds the ranks kept in a group's bit set (8 KiB at most);
// larger or negative ones, which a proc mesh does not have, go to a map.
const maxBitRank = 1<<16 - 1

// NewAggregator returns an empty Aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{index: make(map[string]int)}
}

// Add puts l in the group of its stream and template, opening one if
// this window has none yet.
func (a *Aggregator) Add(l Line) {
	a.pending++
	a.key = append(a.key[:0], byte(l.Stream))
	a.key = appendTemplate(a.key, l.Text)
	if i, ok := a.index[string(a.key)]; ok { // no allocation on a hit
		g := &a.groups[i]
		g.Count++
		if l.Rank != g.lastRank {
			g.addRank(l.Rank)
		}
		return
	}
	a.index[string(a.key)] = len(a.groups)
	a.groups = append(a.groups, groupState{Group: Group{Count: 1, First: l, Ranks: 1}, lastRank: l.Rank})
}

// addRank counts r if the group has not seen it. Consecutive lines of one
// rank, the common case, do not get here.
func (g *groupState) addRank(r int) {
	if g.seen == nil && g.others == nil {
		g.markRank(g.lastRank)
	}
	g.lastRank = r
	if g.markRank(r) {
		g.Ranks++
	}
}

// markRank records r and reports whether it is new.
func (g *groupState) markRank(r int) bool {
	if r < 0 || r > maxBitRank {
		if g.others == nil {
			g.others = make(map[int]struct{})
		}
		_, seen := g.others[r]
		g.others[r] = struct{}{}
		return !seen
	}
	w, bit := r/64, uint64(1)<<(r%64)
	if w >= len(g.seen) {
		g.seen = append(g.seen, make([]uint64, w+1-len(g.seen))...)
	}
	if g.seen[w]&bit != 0 {
		return false
	}
	g.seen[w] |= bit
	return true
}

// Flush returns the groups added since the last Flush, in order of their
// first line, and starts a new window. The caller owns the slice; it is
// nil when nothing was added.
func (a *Aggregator) Flush() []Group {
	if len(a.groups) == 0 {
		a.pending = 0
		return nil
	}
	out := make([]Group, len(a.groups))
	for i := range a.groups {
		out[i] = a.groups[i].Group
	}
	if len(a.groups) > bigWindow {
		// Do not keep the memory of one exceptional window.
		a.groups, a.index = nil, make(map[string]int)
	} else {
		clear(a.groups) // drop references to the lines and rank sets
		a.groups = a.groups[:0]
		clear(a.index)
	}
	a.pending = 0
	return out
}

// Pending returns the number of lines added since the last Flush.
func (a *Aggregator) Pending() int { return a.pending }
