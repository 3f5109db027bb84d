package door

import (
	"net/netip"
	"time"
)

// maxPenalized bounds the sources a door remembers the failures of; past
// it, stale ones are forgotten first, and a new one is not remembered if
// none is (the bounds hold without it).
const maxPenalized = 4096

// penalties are the failures of late of each source, and when it may be
// read again (see Limits.PenaltyFirst). Not safe for concurrent use: the
// door's mu guards them.
type penalties struct {
	first, most time.Duration // zero first: no penalty
	bySource    map[netip.Prefix]*penalty
}

// penalty is a source's failures of late, and when it may be read again.
type penalty struct {
	failures int
	until    time.Time
}

// on tells whether source is penalized at now, and until when.
func (p *penalties) on(source netip.Prefix, now time.Time) (time.Time, bool) {
	pen := p.bySource[source]
	if pen == nil || !now.Before(pen.until) {
		return time.Time{}, false
	}
	return pen.until, true
}

// fail counts a failure of source's at now.
func (p *penalties) fail(source netip.Prefix, now time.Time) {
	if p.first <= 0 {
		return
	}
	if p.bySource == nil {
		p.bySource = map[netip.Prefix]*penalty{}
	}
	pen := p.bySource[source]
	if pen == nil {
		if len(p.bySource) >= maxPenalized {
			for s, o := range p.bySource {
				if now.Sub(o.until) > p.most {
					delete(p.bySource, s)
				}
			}
			if len(p.bySource) >= maxPenalized {
				return
			}
		}
		pen = &penalty{}
		p.bySource[source] = pen
	}
	if now.Sub(pen.until) > p.most {
		pen.failures = 0 // long ago: forgotten
	}
	pen.failures++
	pen.until = now.Add(min(p.first<<min(pen.failures-1, 20), p.most))
}

// forgive forgets source's failures: it proved itself.
func (p *penalties) forgive(source netip.Prefix) {
	delete(p.bySource, source)
}
