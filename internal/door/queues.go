package door

import "net/netip"

// state is where a connection is at the door: one bit each, so that a
// queue can take connections of more than one.
type state uint8

const (
	out     state = 0 // through, displaced, let go or failed
	held    state = 1 << iota
	waiting       // readable, its source penalized
	reading
)

// queues are the connections of the door in some states, by source,
// oldest first, and how many in all. A connection taken out stays in its
// source's list until it reaches an end or the dead are half the list,
// so that taking one out is not a walk of a long list (a flood's source
// may have tens of thousands).
type queues struct {
	states   state // the states whose connections count
	bySource map[netip.Prefix]*queue
	n        int
}

// queue is a source's connections; those in none of the states any more
// are dead.
type queue struct {
	cs   []*Conn
	live int
}

func (q *queues) alive(c *Conn) bool { return c.state&q.states != 0 }

func (q *queues) push(c *Conn) {
	if q.bySource == nil {
		q.bySource = map[netip.Prefix]*queue{}
	}
	sq := q.bySource[c.source]
	if sq == nil {
		sq = &queue{}
		q.bySource[c.source] = sq
	}
	sq.cs = append(sq.cs, c)
	sq.live++
	q.n++
}

// remove counts c, which is leaving q's states, out of q.
func (q *queues) remove(c *Conn) {
	sq := q.bySource[c.source]
	sq.live--
	q.n--
	switch {
	case sq.live == 0:
		delete(q.bySource, c.source)
	case len(sq.cs) > 32 && sq.live < len(sq.cs)/2:
		kept := sq.cs[:0]
		for _, o := range sq.cs {
			if o != c && q.alive(o) {
				kept = append(kept, o)
			}
		}
		clear(sq.cs[len(kept):])
		sq.cs = kept
	}
}

// oldest is the oldest connection of source, or nil.
func (q *queues) oldest(source netip.Prefix) *Conn {
	sq := q.bySource[source]
	if sq == nil {
		return nil
	}
	for len(sq.cs) > 0 && !q.alive(sq.cs[0]) {
		sq.cs[0] = nil
		sq.cs = sq.cs[1:]
	}
	if len(sq.cs) == 0 {
		return nil
	}
	return sq.cs[0]
}

// newest is the newest connection of source, or nil.
func (q *queues) newest(source netip.Prefix) *Conn {
	sq := q.bySource[source]
	if sq == nil {
		return nil
	}
	for len(sq.cs) > 0 && !q.alive(sq.cs[len(sq.cs)-1]) {
		sq.cs[len(sq.cs)-1] = nil
		sq.cs = sq.cs[:len(sq.cs)-1]
	}
	if len(sq.cs) == 0 {
		return nil
	}
	return sq.cs[len(sq.cs)-1]
}

// busiest is the source with the most connections, and how many.
func (q *queues) busiest() (source netip.Prefix, most int) {
	for s, sq := range q.bySource {
		if sq.live > most {
			source, most = s, sq.live
		}
	}
	return source, most
}

// count is how many connections of source are in q.
func (q *queues) count(source netip.Prefix) int {
	if sq := q.bySource[source]; sq != nil {
		return sq.live
	}
	return 0
}
