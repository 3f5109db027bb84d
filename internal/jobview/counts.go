package jobview

import (
	"strings"
	"sync"
)

// Counts counts the job's procs that are up and the hosts they run on,
// for the job's record (`monarch status`), from what every proc announces
// when it starts (its id and host) and from their ends. It remembers the
// host of the last procs that ended (HostOf: a failure is often told
// after its proc's end). Safe for concurrent use; it runs nothing and
// reads no clock: each change is passed, under its lock, to changed.
type Counts struct {
	mu      sync.Mutex
	procs   map[string]string // proc -> host
	hosts   map[string]int    // host -> procs up there
	notProc map[string]bool   // procs that serve as simulated hosts
	// ended remembers the hosts of the last procs that ended (at most
	// MaxEndedHosts).
	ended      map[string]string
	endedOrder []string
	// cameUp counts the procs that came up, and hostsSeen their hosts,
	// however briefly: what the record shows once the job has ended.
	cameUp    int
	hostsSeen map[string]bool
	changed   func(CountsNow)
}

// CountsNow is what Counts has counted: hosts and procs up now, and ever.
type CountsNow struct {
	Hosts, Procs         int
	EverHosts, EverProcs int
}

// MaxEndedHosts bounds what Counts remembers of procs that ended.
const MaxEndedHosts = 4096

// NewCounts counts nothing yet; changed is called, under the lock, after
// each change: it must not block.
func NewCounts(changed func(CountsNow)) *Counts {
	return &Counts{procs: map[string]string{}, hosts: map[string]int{}, notProc: map[string]bool{}, ended: map[string]string{},
		hostsSeen: map[string]bool{}, changed: changed}
}

// HostOf is the name of the host proc runs, or ran, on; "" if unknown.
func (c *Counts) HostOf(proc string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.procs[proc]; ok {
		return h
	}
	return c.ended[proc]
}

// HostsNotProcs says these procs are simulated hosts: their
// announcements, come or to come, are not counted.
func (c *Counts) HostsNotProcs(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if _, counted := c.procs[id]; counted {
			c.cameUp-- // it announced itself before it was known as a host
		}
		c.goneLocked(id)
		c.notProc[id] = true
	}
}

// Up takes a proc's announcement: "<proc> <host>".
func (c *Counts) Up(data []byte) {
	proc, host, _ := strings.Cut(string(data), " ")
	if proc == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.procs[proc]; dup || c.notProc[proc] {
		return
	}
	c.procs[proc] = host
	c.hosts[host]++
	c.cameUp++
	c.hostsSeen[host] = true
	c.changedLocked()
}

// Gone takes a proc's end (an agent's too: ignored, it is no proc).
func (c *Counts) Gone(proc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.goneLocked(proc)
}

func (c *Counts) goneLocked(proc string) {
	host, ok := c.procs[proc]
	if !ok {
		return
	}
	delete(c.procs, proc)
	c.ended[proc] = host
	if c.endedOrder = append(c.endedOrder, proc); len(c.endedOrder) > MaxEndedHosts {
		delete(c.ended, c.endedOrder[0])
		c.endedOrder = c.endedOrder[1:]
	}
	if c.hosts[host]--; c.hosts[host] == 0 {
		delete(c.hosts, host)
	}
	c.changedLocked()
}

func (c *Counts) changedLocked() {
	c.changed(CountsNow{Hosts: len(c.hosts), Procs: len(c.procs), EverHosts: len(c.hostsSeen), EverProcs: c.cameUp})
}
