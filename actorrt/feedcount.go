package actorrt

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobview"
)

// feedOn says whether this process counts for the job state feed: calls
// sent (countSent), messages handled, each endpoint's calls and their
// handler times (endpointStats). Read once, at start (jobenv.FeedVar), so
// that the message path tests a plain bool.
var feedOn = !jobenv.FeedOff()

// numDurBuckets is how many buckets an endpoint's handler times fall in.
const numDurBuckets = jobview.NumDurBuckets

// monoEpoch is when this process started, with its monotonic clock
// reading: an actor's since is nanoseconds after it (monoNow), which
// costs one monotonic clock read where time.Now reads two clocks.
var monoEpoch = time.Now()

// monoNow is the time now, in nanoseconds after monoEpoch.
func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// monoWall is the wall-clock time, in Unix nanoseconds, of a monoNow
// reading.
func monoWall(n int64) int64 { return monoEpoch.Add(time.Duration(n)).UnixNano() }

// endpointStats counts one endpoint's calls in one member, and their
// errors; and times one call in jobctl.TimedEvery (the first, then every
// TimedEvery-th), by how long its handler ran (non-cumulative buckets, as
// jobctl.EndpointState) and the time in all. Every call timed would cost
// the message path a clock read and two stores more per call (a tenth of
// a broadcast's cost at the receiving proc); one in TimedEvery keeps the
// distribution and costs an eighth of that. The proc's inspector reads
// the stats with atomic loads. The member's mailbox, the only writer of
// an ordinary endpoint's (and Supervise's) stats, adds with an atomic
// load and store (recordOwn: no locked add); a concurrent endpoint's
// calls, which run together, with atomic adds (record). A count could be
// lost only when an instance's handler outlives the cleanup timeout of
// its restart and runs beside its successor's.
type endpointStats struct {
	calls   atomic.Uint64
	errors  atomic.Uint64
	buckets [numDurBuckets]atomic.Uint64
	nanos   atomic.Uint64
}

// record counts a call that started at start (monoNow), failed or not:
// one of several writers.
func (s *endpointStats) record(start int64, failed bool) {
	if n := s.calls.Add(1); (n-1)%jobctl.TimedEvery == 0 {
		s.time(time.Duration(monoNow() - start))
	}
	if failed {
		s.errors.Add(1)
	}
}

func (s *endpointStats) time(d time.Duration) {
	s.buckets[durBucket(d)].Add(1)
	if d > 0 {
		s.nanos.Add(uint64(d))
	}
}

// recordOwn is record by the only writer.
func (s *endpointStats) recordOwn(start int64, failed bool) {
	n := s.calls.Load()
	s.calls.Store(n + 1)
	if n%jobctl.TimedEvery == 0 {
		d := time.Duration(monoNow() - start)
		b := &s.buckets[durBucket(d)]
		b.Store(b.Load() + 1)
		if d > 0 {
			s.nanos.Store(s.nanos.Load() + uint64(d))
		}
	}
	if failed {
		s.errors.Store(s.errors.Load() + 1)
	}
}

// handled is how many calls the stats of a member counted.
func handled(st []endpointStats) uint64 {
	var n uint64
	for i := range st {
		n += st[i].calls.Load()
	}
	return n
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
// that started at start (monoNow), from the actor's mailbox; countShared
// from a concurrent call's goroutine. The caller checked feedOn.
func (a *actor) count(stat int, start int64, failed bool) {
	if stat > 0 && stat <= len(a.stats) {
		a.stats[stat-1].recordOwn(start, failed)
	}
}

func (a *actor) countShared(stat int, start int64, failed bool) {
	if stat > 0 && stat <= len(a.stats) {
		a.stats[stat-1].record(start, failed)
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

// endpointFigures sums the stats of lm's members here, endpoint by
// endpoint; those not called yet are left out.
func (lm *localMesh) endpointFigures() []jobview.EndpointFigures {
	var out []jobview.EndpointFigures
	for i, name := range lm.typ.statNames {
		ef := jobview.EndpointFigures{Name: name, Buckets: make([]uint64, numDurBuckets)}
		for _, st := range lm.stats {
			s := &st[i]
			ef.Calls += s.calls.Load()
			for b := range s.buckets {
				ef.Buckets[b] += s.buckets[b].Load()
			}
			ef.Nanos += s.nanos.Load()
			ef.Errors += s.errors.Load()
		}
		if ef.Calls > 0 {
			out = append(out, ef)
		}
	}
	return out
}
