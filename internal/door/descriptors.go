package door

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// processDoors are the open doors of this process. What they hold shares
// the process's descriptors, so it is bounded across them: a flood at one
// listener may take the descriptors another's clients need, or those of
// everything else the process opens, only up to that bound. The one
// process-wide thing here, as the descriptors it counts are.
var processDoors = doors{bound: sync.OnceValue(heldBound)}

// doors are the doors of a process, and what they hold together.
type doors struct {
	bound func() int64
	held  atomic.Int64

	mu  sync.Mutex
	all map[*Door]struct{}
}

// heldBound is what the doors of this process hold together: two thirds
// of the descriptors it may open (the rest for what it serves and opens
// besides), at least 1024.
func heldBound() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return max(int64(rl.Cur)/3*2, 1024)
}

func (p *doors) add(d *Door) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.all == nil {
		p.all = map[*Door]struct{}{}
	}
	p.all[d] = struct{}{}
}

func (p *doors) remove(d *Door) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.all, d)
}

// giveWay closes a held connection of the door that holds the most: the
// doors together hold more than their bound.
func (p *doors) giveWay() {
	p.mu.Lock()
	var most *Door
	for d := range p.all {
		if most == nil || d.heldN.Load() > most.heldN.Load() {
			most = d
		}
	}
	p.mu.Unlock()
	if most != nil {
		most.giveWayHeld()
	}
}
