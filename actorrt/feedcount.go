package actorrt

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// feedOn says whether this process counts for the job state feed: calls
// sent (countSent), messages handled, each endpoint's calls and their
// handler times (endpointStats). Read once, at start (jobenv.FeedVar), so
// that the message path tests a plain bool.
var feedOn = !jobenv.FeedOff()

// numDurBuckets is how many buckets an endpoint's handler times fall in:
// one per bound of jobctl.DurationBounds, and one past them.
const numDurBuckets = jobctl.NumDurationBounds + 1

// endpointStats counts one endpoint's calls in one member: by how long
// the handler ran (non-cumulative buckets, as jobctl.EndpointState), the
// time in all and the errors. Only atomic adds: the member's mailbox
// writes (a concurrent endpoint's goroutines too), the proc's inspector
// reads.
type endpointStats struct {
	buckets [numDurBuckets]atomic.Uint64
	nanos   atomic.Uint64
	errors  atomic.Uint64
}

// record counts a call that took d, failed or not.
func (s *endpointStats) record(d time.Duration, failed bool) {
	s.buckets[durBucket(d)].Add(1)
	if d > 0 {
		s.nanos.Add(uint64(d))
	}
	if failed {
		s.errors.Add(1)
	}
}

// durBucket is the bucket of a handler time d: the first whose bound
// (jobctl.FirstDurationBound doubling) is at least d.
func durBucket(d time.Duration) int {
	if d <= jobctl.FirstDurationBound {
		return 0
	}
	return min(bits.Len64(uint64(d-1)/uint64(jobctl.FirstDurationBound)), numDurBuckets-1)
}

// count counts a call of the endpoint in stats slot stat (method.stat)
// that took d: in the member's handled count and its endpoint's stats.
// The caller checked feedOn.
func (a *actor) count(stat int, d time.Duration, failed bool) {
	a.handled.Add(1)
	if stat > 0 && stat <= len(a.stats) {
		a.stats[stat-1].record(d, failed)
	}
}

// newStats makes the endpoint stats of the members of lm with base ranks
// ranks: nil when the feed counts nothing.
func (lm *localMesh) newStats(ranks []int) {
	if !feedOn || len(lm.typ.statNames) == 0 {
		return
	}
	lm.stats = make(map[int][]endpointStats, len(ranks))
	for _, r := range ranks {
		lm.stats[r] = make([]endpointStats, len(lm.typ.statNames))
	}
}

// endpointFigures is what the members of a mesh on a proc handled through
// one endpoint: jobctl.EndpointState's figures, the sum in nanoseconds.
type endpointFigures struct {
	Name    string   `msgpack:"name"`
	Buckets []uint64 `msgpack:"buckets"`
	Nanos   uint64   `msgpack:"nanos"`
	Errors  uint64   `msgpack:"errors"`
}

// endpointFigures sums the stats of lm's members here, endpoint by
// endpoint; those not called yet are left out.
func (lm *localMesh) endpointFigures() []endpointFigures {
	var out []endpointFigures
	for i, name := range lm.typ.statNames {
		ef := endpointFigures{Name: name, Buckets: make([]uint64, numDurBuckets)}
		n := uint64(0)
		for _, st := range lm.stats {
			s := &st[i]
			for b := range s.buckets {
				c := s.buckets[b].Load()
				ef.Buckets[b] += c
				n += c
			}
			ef.Nanos += s.nanos.Load()
			ef.Errors += s.errors.Load()
		}
		if n > 0 {
			out = append(out, ef)
		}
	}
	return out
}
