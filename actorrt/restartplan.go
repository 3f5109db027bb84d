package actorrt

import (
	"fmt"
	"slices"
	"time"
)

// restartPlanner decides, for one mesh with a RestartPolicy, what a
// failed member leads to: a restart of its group (the member alone, the
// members along some dimensions through it, or the whole mesh) after a
// backoff, or, past the policy's limit, an escalation to the mesh's owner
// as if the mesh had no policy.
//
// The limit counts restarts of the mesh (one per group restarted, however
// many members it holds) whose decision lies within the window before
// now; the backoff before the k-th of them (k from 0) is Backoff doubled
// k times, at most MaxBackoff. A member whose group is already waiting for
// its restart, or restarting, is part of that restart: its failure adds
// none. Once the planner has escalated it decides nothing more (every
// later failure goes to the owner), until the owner restarts members by
// hand (manual), which also clears the history.
//
// It is a plain state machine, like the failureRouter that drives it: no
// I/O, clock or goroutines; times come in with the events.
type restartPlanner struct {
	policy    RestartPolicy
	base      Extent
	along     []int       // indices of the scope's dimensions in base; all of them for the whole mesh
	history   []time.Time // decisions to restart within the window, oldest first
	busy      map[int]bool
	escalated bool
}

// restartDecision is what a failure leads to: ranks to restart after a
// delay, or (ranks nil) an escalation, with why.
type restartDecision struct {
	ranks    []int
	after    time.Duration
	escalate string
}

func newRestartPlanner(p RestartPolicy, base Extent) (*restartPlanner, error) {
	if err := p.check(base); err != nil {
		return nil, err
	}
	rp := &restartPlanner{policy: p, base: base, busy: map[int]bool{}}
	if p.Scope.whole {
		for i := range base.dims {
			rp.along = append(rp.along, i)
		}
	} else {
		for _, d := range p.Scope.dims {
			rp.along = append(rp.along, base.index(d))
		}
	}
	return rp, nil
}

// failed decides about base ranks that failed together at now (one
// member, or the members on a proc that ended): one restart, of the union
// of their groups. absorbed reports members whose groups already restart:
// nothing to do.
func (rp *restartPlanner) failed(ranks []int, now time.Time) (d restartDecision, absorbed bool) {
	var fresh []int
	for _, b := range ranks {
		if !rp.busy[b] {
			fresh = append(fresh, b)
		}
	}
	if len(fresh) == 0 {
		return restartDecision{}, true
	}
	if rp.escalated {
		return restartDecision{escalate: "its mesh's restart policy gave up earlier"}, false
	}
	p := rp.policy
	cut := now.Add(-p.Window)
	rp.history = slices.DeleteFunc(rp.history, func(t time.Time) bool { return !t.After(cut) })
	if len(rp.history) >= p.MaxRestarts {
		rp.escalated = true
		plural := "s"
		if len(rp.history) == 1 {
			plural = ""
		}
		return restartDecision{escalate: fmt.Sprintf("%d restart%s in %v, the limit of its restart policy", len(rp.history), plural, p.Window)}, false
	}
	after := p.Backoff
	for range len(rp.history) {
		if after >= p.MaxBackoff {
			break
		}
		after *= 2
	}
	after = min(after, p.MaxBackoff)
	rp.history = append(rp.history, now)
	d = restartDecision{after: after}
	for _, b := range fresh {
		if rp.busy[b] {
			continue // in the group of one before it
		}
		for _, r := range rp.group(b) {
			if !rp.busy[r] {
				rp.busy[r] = true
				d.ranks = append(d.ranks, r)
			}
		}
	}
	slices.Sort(d.ranks)
	return d, false
}

// done records that the restart of ranks ended (each member restarted,
// or failed again and was reported).
func (rp *restartPlanner) done(ranks []int) {
	for _, r := range ranks {
		delete(rp.busy, r)
	}
}

// manual records a restart by hand (ActorMesh.Restart): the owner took
// the failures over, so the policy starts afresh.
func (rp *restartPlanner) manual() {
	rp.escalated = false
	rp.history = rp.history[:0]
}

// group is the base ranks that restart with b: those whose coordinates
// equal b's in every dimension outside the scope.
func (rp *restartPlanner) group(b int) []int {
	pt := rp.base.point(b)
	var out []int
	for r := range rp.base.NumRanks() {
		q := rp.base.point(r)
		same := true
		for i := range pt.coords {
			if q.coords[i] != pt.coords[i] && !slices.Contains(rp.along, i) {
				same = false
				break
			}
		}
		if same {
			out = append(out, r)
		}
	}
	return out
}
