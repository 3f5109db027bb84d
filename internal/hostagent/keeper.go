package hostagent

import (
	"sync"
	"syscall"

	"github.com/monarch-go/monarch/internal/child"
)

// keeperOnce is an agent's keeper (child.Keeper): started at its first
// child, closed with the agent. A keeper that cannot start is said once
// in the log; the children still end with the agent (their parent-death
// signal), only what they started in their groups may not.
type keeperOnce struct {
	mu     sync.Mutex
	k      *child.Keeper
	tried  bool
	closed bool
}

// keep has the keeper end process group pgid if the agent dies.
func (a *Agent) keep(pgid int) {
	k := a.keeper.get(a)
	if k == nil {
		return
	}
	if err := k.Keep(pgid); err != nil {
		a.cfg.Log.Warn().Err(err).Int("group", pgid).Msg("its group will not end with the agent")
	}
}

// forgetIfEmpty tells the keeper to forget group pgid once no process
// of it is left: its id may then be a new process's.
func (a *Agent) forgetIfEmpty(pgid int) {
	if syscall.Kill(-pgid, 0) != syscall.ESRCH {
		return // still has processes: kept until they end, or the agent does
	}
	a.keeper.mu.Lock()
	k := a.keeper.k
	a.keeper.mu.Unlock()
	if k != nil {
		k.Forget(pgid)
	}
}

func (o *keeperOnce) get(a *Agent) *child.Keeper {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.tried && !o.closed {
		o.tried = true
		k, err := child.StartKeeper()
		if err != nil {
			a.cfg.Log.Error().Err(err).Msg("no keeper: what procs start in their groups may outlive the agent")
		}
		o.k = k
	}
	return o.k
}

// close ends the keeper, and with it the groups still kept.
func (o *keeperOnce) close() {
	o.mu.Lock()
	k := o.k
	o.closed = true
	o.mu.Unlock()
	if k != nil {
		k.Close()
	}
}
