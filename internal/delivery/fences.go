package delivery

import "sync/atomic"

// maxFences bounds the fences a frame carries (a few KiB of header): more
// go ahead of it in empty frames.
var maxFences atomic.Int64

func init() { maxFences.Store(64) }

// SetMaxFences sets how many fences a frame carries, at most, until the
// returned restore is called: for tests of the fences sent ahead of a
// frame in empty ones.
func SetMaxFences(n int) (restore func()) {
	old := maxFences.Swap(int64(n))
	return func() { maxFences.Store(old) }
}
