package actorrt

import (
	"fmt"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/wire"
)

// A failure's tail and the job record's keep as many lines: this does
// not compile if the two bounds differ.
const _ = uint(MaxTail-jobstate.MaxTail) + uint(jobstate.MaxTail-MaxTail)

// WithGrace's doc says an hour, the most a host agent accepts: this does
// not compile if the two differ.
const _ = uint(wire.MaxStopGrace-time.Hour) + uint(time.Hour-wire.MaxStopGrace)

// TestProcEndsBounded: the ends of a slot whose procs are replaced again
// and again, with nobody reading Ends, are held up to maxPendingEnds
// beyond the channel's one per slot (and one on its way); past that the oldest are dropped,
// and the next end read counts them: every end is read or counted, once,
// in order.
func TestProcEndsBounded(t *testing.T) {
	ext, _ := NewExtent(Dims{{"gpus", 1}})
	pe := newProcEnds(ext, []procInfo{{ID: "c-1", Host: "h0"}})
	done := make(chan struct{})
	defer close(done)
	pe.done = done
	const n = maxPendingEnds + 900
	cur := "c-1"
	for i := range n {
		pe.end(wire.GoneNotice{Proc: cur, Reason: "killed by SIGKILL", Status: 137})
		next := fmt.Sprintf("c-1-%d", i+1)
		if !pe.replaced(cur, procInfo{ID: next, Host: "h0"}) {
			t.Fatalf("incarnation %d of the slot not taken", i+1)
		}
		cur = next
	}
	pe.mu.Lock()
	pending := len(pe.pending)
	pe.mu.Unlock()
	if pending > maxPendingEnds {
		t.Fatalf("%d ends held beyond the channel, want at most %d", pending, maxPendingEnds)
	}
	read, counted, last := 0, 0, -1
	for read+counted < n {
		select {
		case e := <-pe.ch:
			read++
			counted += e.Dropped
			if e.Incarnation <= last || e.Incarnation != read+counted-1 {
				t.Fatalf("end of incarnation %d after %d, with %d read and %d counted dropped", e.Incarnation, last, read, counted)
			}
			last = e.Incarnation
		case <-time.After(10 * time.Second):
			t.Fatalf("%d ends read and %d counted dropped, of %d", read, counted, n)
		}
	}
	// The channel's one, the one on its way into it, and those held.
	if read != maxPendingEnds+2 || counted != n-read {
		t.Fatalf("%d ends read, %d counted dropped, of %d: want %d read", read, counted, n, maxPendingEnds+2)
	}
	select {
	case e := <-pe.ch:
		t.Fatalf("an end more: %v", e)
	case <-time.After(50 * time.Millisecond):
	}
}
