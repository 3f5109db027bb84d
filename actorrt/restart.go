package actorrt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
)

// RestartPolicy restarts the failed members of a mesh in place, given at
// spawn (SpawnWith). A member that fails (an endpoint's error or panic
// that nobody receives, a Supervise that does not handle a failure, a
// full mailbox, the end of its proc) is replaced: same mesh, id, name and
// rank, a new value of the actor's type whose Init runs again with the
// spawn arguments; every reference to the mesh keeps working. Its Scope
// says which members restart with it. A member whose proc ended restarts
// on a new proc its host agent starts in the old one's place; one whose
// host is gone is not restarted: its failure goes to the owner.
//
// At most MaxRestarts restarts (of a member or a group) in any Window; the
// one past that escalates the failure to the mesh's owner, as if the mesh
// had no policy (Supervise, then the fault hook): the member stays failed
// until the owner restarts it by hand (ActorMesh.Restart) or stops the
// mesh, or, spawned with SpawnOptions.GoOnWithout, the mesh goes on
// without it. A member whose Init fails on a restart has failed again.
//
// What a restart keeps, what a caller in flight sees, the order of later
// messages and the cases of a proc or a host that died are written once,
// in the package doc's "Restarts in place", each with its tests.
type RestartPolicy struct {
	// MaxRestarts is how many restarts the mesh may have in Window; at
	// least 1.
	MaxRestarts int
	// Window is the span MaxRestarts counts over; positive.
	Window time.Duration
	// Backoff is the wait before the first restart in the window; each
	// further one waits twice the previous, at most MaxBackoff. 0 restarts
	// at once.
	Backoff, MaxBackoff time.Duration
	// Scope is the members that restart with a failed one.
	Scope RestartScope
}

// DefaultRestartPolicy restarts the failed member alone, at most 3 times
// in a minute, waiting 100ms before the first restart and doubling up to
// 10s.
func DefaultRestartPolicy() RestartPolicy {
	return RestartPolicy{MaxRestarts: 3, Window: time.Minute, Backoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second}
}

// RestartScope is which members of a mesh restart when one fails: the
// member alone (the zero RestartScope, RestartMember), the members along
// some dimensions through it (RestartAlong), or all of them
// (RestartMesh).
type RestartScope struct {
	dims  []string
	whole bool
}

var (
	// RestartMember restarts the failed member alone (one-for-one).
	RestartMember = RestartScope{}
	// RestartMesh restarts every member of the mesh (all-for-one).
	RestartMesh = RestartScope{whole: true}
)

// RestartAlong restarts the members that differ from the failed one only
// in the named dimensions: in a mesh {hosts: 2, gpus: 4},
// RestartAlong("gpus") restarts the 4 members of the failed one's host
// (a tensor-parallel group), RestartAlong("hosts") the members of its
// column.
func RestartAlong(dims ...string) RestartScope {
	return RestartScope{dims: slices.Clone(dims)}
}

func (s RestartScope) String() string {
	switch {
	case s.whole:
		return "the whole mesh"
	case len(s.dims) == 0:
		return "the member alone"
	}
	return "along " + strings.Join(s.dims, ", ")
}

// check tells what is wrong with the policy for a mesh of extent base.
func (p RestartPolicy) check(base Extent) error {
	var bad []string
	if p.MaxRestarts < 1 {
		bad = append(bad, fmt.Sprintf("MaxRestarts %d (at least 1)", p.MaxRestarts))
	}
	if p.Window <= 0 {
		bad = append(bad, fmt.Sprintf("Window %v (positive)", p.Window))
	}
	if p.Backoff < 0 {
		bad = append(bad, fmt.Sprintf("Backoff %v (0 or more)", p.Backoff))
	}
	if p.MaxBackoff < p.Backoff {
		bad = append(bad, fmt.Sprintf("MaxBackoff %v (at least Backoff, %v)", p.MaxBackoff, p.Backoff))
	}
	for i, d := range p.Scope.dims {
		if base.index(d) < 0 {
			bad = append(bad, fmt.Sprintf("Scope along %q, a dimension the mesh %v lacks", d, base))
		} else if slices.Contains(p.Scope.dims[:i], d) {
			bad = append(bad, fmt.Sprintf("Scope along %q twice", d))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: restart policy: %s", ErrBadArgs, strings.Join(bad, "; "))
	}
	return nil
}

// SpawnOptions shape a mesh beyond Spawn's procs, name and Init
// arguments.
type SpawnOptions struct {
	// PerProc puts several members on each proc, as SpawnPerProc does.
	PerProc Dims
	// Restart, when set, restarts failed members in place.
	Restart *RestartPolicy
	// GoOnWithout keeps the mesh going without a member that cannot be
	// restarted (its Restart policy's restarts are spent, its host is
	// gone, or the mesh has no policy and it failed): the member is
	// missing from then on. Call, Broadcast and Stream skip it, Choose
	// never picks it, CallOne to it fails at once with ErrMissing naming
	// it and why, a Call's ValueMesh marks it (ValueMesh.Missing), and
	// the owner is told once, by a MeshFailure with GoesOn set, which
	// does not end the job (an owner's Supervise or the fault hook that
	// does not handle it only logs it). A restart by hand
	// (ActorMesh.Restart) brings the member back.
	GoOnWithout bool
}

// SpawnWith is Spawn with options: members per proc, a restart policy.
func SpawnWith[T any](ctx context.Context, procs *ProcMesh, name string, opts SpawnOptions, args ...any) (*ActorMesh[T], error) {
	return spawnTyped[T](ctx, procs, name, opts, args)
}

// restartReq (wire.OpRestart) restarts members of a mesh on the receiving
// proc: a failed member's waiting instance starts (its Init runs), a live
// member of the group is replaced. With GiveUp, the failed members'
// waiting instances fail instead, for that reason: the failure went to
// the owner.
type restartReq struct {
	Mesh   string `msgpack:"mesh"`
	Ranks  []int  `msgpack:"ranks"`
	Cause  string `msgpack:"cause"`            // why: the failure that restarts them
	GiveUp string `msgpack:"giveup,omitempty"` // fail them instead, for this reason
	// Missing, with GiveUp: the mesh goes on without them (GoOnWithout):
	// their calls fail with ErrMissing.
	Missing bool `msgpack:"missing,omitempty"`
	Manual  bool `msgpack:"manual,omitempty"` // ActorMesh.Restart: only failed members
}

func (r *restartReq) check() error {
	if !wire.ValidID(r.Mesh) || isSystemMesh(r.Mesh) {
		return fmt.Errorf("mesh id %.40q", r.Mesh)
	}
	if len(r.Ranks) == 0 {
		return errors.New("restart of no ranks")
	}
	seen := make(map[int]bool, len(r.Ranks))
	for _, b := range r.Ranks {
		if b < 0 || b >= maxMembers || seen[b] {
			return fmt.Errorf("restart of rank %d (out of range, or given twice)", b)
		}
		seen[b] = true
	}
	return nil
}

// Restart restarts in place the members of the (sliced) mesh that
// failed: a new instance of each, whose Init runs with the spawn
// arguments, at the same rank; references keep working. Members that run,
// and those the mesh's RestartPolicy is restarting, are left alone; a
// mesh with no failed member among them is ErrNotFailed. It is for the
// mesh's owner, from Supervise (or, for a mesh the client owns, from the
// client), with or without a RestartPolicy. It returns once every
// restarted member's Init returned, waiting at most the spawn timeout or
// until ctx ends; its error names each failed member that did not
// restart (those stay failed: the owner may call it again). A failed
// member whose proc ended is not restarted by hand: its error wraps
// ErrProcFailed and says what to do instead. A member missing from a mesh
// that goes on without it (GoOnWithout) has failed: restarted, it is
// missing no more. The package doc's "Restarts in place" says what a
// restart keeps.
func (m *ActorMesh[A]) Restart(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	if m.ref == nil {
		return fmt.Errorf("actorrt: Restart on a mesh that was not spawned")
	}
	rt := m.ref.rt
	failed, err := rt.sup.restartByHand(m.ref.id, m.reg.baseRanks())
	if err != nil {
		return fmt.Errorf("actorrt: Restart %s: %w", m.ref.name, err)
	}
	errs := map[int]error{}
	onLive, dead := rt.sup.splitByProcEnded(m.ref, failed)
	// A member whose proc ended restarts on the proc its slot's host
	// agent starts in its place (or started already, for another mesh).
	rt.sup.moveToNewProcs(ctx, m.ref, dead, errs, map[int]bool{})
	var whole error
	if len(onLive) > 0 {
		var rerrs map[int]error
		rerrs, whole = restartMembers(ctx, rt, m.ref, onLive, "restarted by its owner", true)
		maps.Copy(errs, rerrs)
	}
	// Those that did not restart stay failed: the owner may try again.
	var restarted []int
	var bad []any
	for _, b := range failed {
		err := errs[b]
		if err == nil && whole != nil && slices.Contains(onLive, b) {
			err = whole
		}
		if err != nil {
			bad = append(bad, fmt.Errorf("%s[%d]: %w", m.ref.name, b, err))
			continue
		}
		restarted = append(restarted, b)
	}
	rt.sup.restartDone(m.ref.id, restarted, nil)
	// Missing members restarted are back (GoOnWithout), in this reference
	// and the one supervision keeps.
	m.ref.markPresent(restarted)
	if own := rt.sup.ref(m.ref.id); own != nil {
		own.markPresent(restarted)
	}
	if len(bad) > 0 {
		// Each member's error, wrapped: errors.Is finds ErrProcFailed and the rest.
		format := "actorrt: Restart %s: " + strings.TrimSuffix(strings.Repeat("%w; ", len(bad)), "; ")
		return fmt.Errorf(format, append([]any{m.ref.name}, bad...)...)
	}
	return nil
}

// restartMembers asks the procs of ranks to restart them, and waits for
// each new instance's Init (at most the spawn timeout, or until ctx ends).
// It returns the error of each rank whose restart failed (its Init, or
// its proc), by rank, or an error of the whole.
func restartMembers(ctx context.Context, rt *core, ref *meshRef, ranks []int, cause string, manual bool) (map[int]error, error) {
	byProc := map[string][]int{}
	var procs []string
	for _, b := range ranks {
		p := ref.procOf(b) // where it lives now: a restart may have moved it
		if byProc[p] == nil {
			procs = append(procs, p)
		}
		byProc[p] = append(byProc[p], b)
	}
	rp := newRestartPort(ranks)
	port, err := rt.ports.open(rp, procs)
	if err != nil {
		return nil, err
	}
	defer rt.ports.close(port)
	if err := rt.health.anyGone(procs); err != nil {
		return nil, err
	}
	for _, p := range procs {
		req := &restartReq{Mesh: ref.id, Ranks: byProc[p], Cause: cause, Manual: manual}
		if err := rt.sendControl(p, wire.OpRestart, port, req); err != nil {
			return nil, err
		}
	}
	return rp.wait(ctx, rt.opts.spawnTimeout, "restart of "+ref.name)
}

// restartPort gathers the answer of each restarted member: the base
// rank's new instance ran its Init, or why not. Each answer's rank is its
// base rank.
type restartPort struct {
	mu   sync.Mutex
	errs map[int]error
	left map[int]bool
	all  error // the port failed as a whole
	done chan struct{}
}

func newRestartPort(ranks []int) *restartPort {
	p := &restartPort{errs: map[int]error{}, left: map[int]bool{}, done: make(chan struct{})}
	for _, r := range ranks {
		p.left[r] = true
	}
	return p
}

func (p *restartPort) deliver(rt *core, f *wire.Frame) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.left[f.Rank] {
		return len(p.left) > 0 // not one it waits for, or a second answer
	}
	var v Void
	if err := decodeReply(rt, f, &v); err != nil {
		p.errs[f.Rank] = err
	}
	delete(p.left, f.Rank)
	if len(p.left) > 0 {
		return true
	}
	close(p.done)
	return false
}

func (p *restartPort) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.left) == 0 || p.all != nil {
		return
	}
	p.all = err
	close(p.done)
}

// wait waits for every answer, at most d or until ctx ends, and returns
// the result; what names the operation in its error.
func (p *restartPort) wait(ctx context.Context, d time.Duration, what string) (map[int]error, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.mu.Lock()
		n := len(p.left)
		p.mu.Unlock()
		return nil, fmt.Errorf("%s: no answer from %d members: %w", what, n, ctx.Err())
	}
	return p.result()
}

func (p *restartPort) result() (map[int]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errs, p.all
}

// giveUpOn fails the waiting instances of ranks, for reason; missing:
// the mesh goes on without them, so they, and failed members with no
// waiting instance, answer with ErrMissing. A proc that ended is told
// nothing.
func giveUpOn(rt *core, ref *meshRef, ranks []int, reason string, missing bool) {
	byProc := map[string][]int{}
	for _, b := range ranks {
		byProc[ref.procOf(b)] = append(byProc[ref.procOf(b)], b)
	}
	for p, rs := range byProc {
		if rt.health.goneErr(p) != nil {
			continue
		}
		rt.sendControl(p, wire.OpRestart, 0, &restartReq{Mesh: ref.id, Ranks: rs, GiveUp: reason, Missing: missing})
	}
}
