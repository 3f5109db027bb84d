package actorrt

import (
	"reflect"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// TestFeedDurBuckets: a handler time falls in the first bucket whose
// bound (jobctl.DurationBounds) is at least it; past the last, in the
// one beyond.
func TestFeedDurBuckets(t *testing.T) {
	bounds := jobctl.DurationBounds()
	if len(bounds)+1 != numDurBuckets {
		t.Fatalf("%d bounds, %d buckets", len(bounds), numDurBuckets)
	}
	for i, le := range bounds {
		d := time.Duration(le * 1e9)
		if got := durBucket(d); got != i {
			t.Errorf("durBucket(%v) = %d, want %d", d, got, i)
		}
		if got := durBucket(d + 1); got != i+1 {
			t.Errorf("durBucket(%v) = %d, want %d", d+1, got, i+1)
		}
	}
	for _, d := range []time.Duration{-time.Second, 0, 1} {
		if got := durBucket(d); got != 0 {
			t.Errorf("durBucket(%v) = %d, want 0", d, got)
		}
	}
	if got := durBucket(time.Hour); got != numDurBuckets-1 {
		t.Errorf("durBucket(1h) = %d, want %d", got, numDurBuckets-1)
	}
	var s endpointStats
	s.time(70 * time.Microsecond)
	s.time(3 * time.Second)
	if s.buckets[1].Load() != 1 || s.buckets[numDurBuckets-1].Load() != 1 || s.nanos.Load() != uint64(3*time.Second+70*time.Microsecond) {
		t.Errorf("stats after two times: bucket 1 %d, last %d, nanos %d", s.buckets[1].Load(), s.buckets[numDurBuckets-1].Load(), s.nanos.Load())
	}
}

// TestFeedTimedEvery: every call is counted, its errors too, and one in
// jobctl.TimedEvery is timed (the first, then every TimedEvery-th), by
// the only writer and by several alike.
func TestFeedTimedEvery(t *testing.T) {
	for _, shared := range []bool{false, true} {
		var s endpointStats
		n := 2*jobctl.TimedEvery + 1
		for i := range n {
			if shared {
				s.record(monoNow(), i == 0)
			} else {
				s.recordOwn(monoNow(), i == 0)
			}
		}
		var timed uint64
		for b := range s.buckets {
			timed += s.buckets[b].Load()
		}
		if s.calls.Load() != uint64(n) || s.errors.Load() != 1 || timed != 3 {
			t.Errorf("shared %v: %d calls, %d errors, %d timed; want %d, 1, 3", shared, s.calls.Load(), s.errors.Load(), timed, n)
		}
	}
}

// TestFeedEndpointSlots: each endpoint has its slot, by name, Supervise
// the last; Init none.
func TestFeedEndpointSlots(t *testing.T) {
	at, err := inspect(reflectTypeOfSlotted)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A", "B", "Supervise"}
	if len(at.statNames) != len(want) {
		t.Fatalf("slots %v, want %v", at.statNames, want)
	}
	for i, n := range want {
		if at.statNames[i] != n {
			t.Errorf("slot %d: %s, want %s", i, at.statNames[i], n)
		}
	}
	if at.endpoints["A"].stat != 1 || at.endpoints["B"].stat != 2 || at.superviseStat != 3 || at.init.stat != 0 {
		t.Errorf("stats A %d B %d Supervise %d Init %d", at.endpoints["A"].stat, at.endpoints["B"].stat, at.superviseStat, at.init.stat)
	}
}

type slotted struct{}

func (*slotted) Init(ctx *Context) error                     { return nil }
func (*slotted) B(ctx *Context) error                        { return nil }
func (*slotted) A(ctx *Context) (int, error)                 { return 0, nil }
func (*slotted) Supervise(ctx *Context, f *MeshFailure) bool { return true }

var reflectTypeOfSlotted = reflect.TypeFor[slotted]()
