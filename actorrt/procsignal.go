package actorrt

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
)

// Notify sends sig to every proc of the (sliced) mesh that catches it
// (a handler is installed for it: /proc/<pid>/status SigCgt), and
// returns how many it was sent to. It is how an SPMD job's commands hear
// that the job is about to end (see spmd): a signal such as SIGUSR1 ends
// a process that does not expect it, so a proc without a handler is
// left alone. sig is one of SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP.
// It waits for the procs' agents, at most 10s, or until ctx ends.
func (p *ProcMesh) Notify(ctx context.Context, sig syscall.Signal) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if !slices.Contains(wire.NoticeSignals, int(sig)) {
		return 0, fmt.Errorf("%w: Notify with %v: want SIGUSR1, SIGUSR2, SIGTERM, SIGINT or SIGHUP", ErrBadArgs, sig)
	}
	rt, err := p.runtime()
	if err != nil {
		return 0, err
	}
	byAgent, agents, err := p.byAgent(rt, "Notify")
	if err != nil {
		return 0, err
	}
	if len(agents) == 0 {
		return 0, nil
	}
	ext, _ := NewExtent(Dims{{"agents", len(agents)}})
	fut := newFuture[ValueMesh[int]](label{mesh: "notify " + p.String()})
	port, err := rt.ports.open(newCallPort[int](fut, ext), agents)
	if err != nil {
		return 0, err
	}
	defer rt.ports.close(port)
	for i, a := range agents {
		req := &wire.StopProcsReq{IDs: byAgent[a], Rank: i, Signal: int(sig)}
		if err := rt.sendControl(a, wire.OpSignalProcs, port, req); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sent, err := fut.Get(ctx)
	if err != nil {
		return 0, fmt.Errorf("actorrt: Notify %v: %w", p, err)
	}
	n := 0
	for _, v := range sent.Values() {
		n += v
	}
	return n, nil
}
