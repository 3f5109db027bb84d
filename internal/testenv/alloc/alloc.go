// Package alloc measures what a function allocates, for tests that bound
// what a hostile input can make a receiver allocate. It imports no other
// monarch package, so that the tests of every package (bus and
// hostsconfig included) may use it.
package alloc

import (
	"math"
	"runtime/metrics"
)

// Slack is what By may count beyond what fn allocated: runtime/metrics,
// which unlike runtime.ReadMemStats does not stop the world, counts small
// objects a span at a time (a span for each of a few size classes; large
// objects, the ones that matter to these bounds, are counted as they are
// made), and the runtime's own goroutines allocate meanwhile.
const Slack = 256 << 10

// By is the smallest number of heap bytes fn allocated over three runs:
// the minimum filters out what other goroutines allocated meanwhile. fn
// must be safe to run three times.
func By(fn func()) uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	best := uint64(math.MaxUint64)
	for range 3 {
		metrics.Read(sample)
		before := sample[0].Value.Uint64()
		fn()
		metrics.Read(sample)
		best = min(best, sample[0].Value.Uint64()-before)
	}
	return best
}
