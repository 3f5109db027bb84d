package actorrt

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/monarch-go/monarch/actorrt/internal/inproc"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/hostagent"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// Runtimes inside one process, for an in-process cluster
// (actorrt/actortest): a client and procs that are the same runtimes as
// a job's (client.go, worker.go), started and ended without a process of
// their own. The hooks are set once; they are not part of the API.
func init() {
	inproc.Set(inproc.Hooks{
		NewClient: newInprocClient,
		StartProc: startInprocProc,
		Hosts: func(ctx context.Context, n int) (any, error) {
			rt, err := runtimeOf(ctx)
			if err != nil {
				return nil, err
			}
			return rt.simulatedHosts(ctx, n)
		},
		ProcIDs: func(procs any) []string {
			if pm, ok := procs.(*ProcMesh); ok && pm != nil && pm.err == nil {
				return pm.ids()
			}
			return nil
		},
	})
}

// inprocOptions are the options of an in-process runtime: the job's,
// the program's (opts, a []Option) and the starter of its agent's procs.
func inprocOptions(env jobenv.Env, starter hostagent.Starter, opts any) (options, error) {
	given, ok := opts.([]Option)
	if !ok && opts != nil {
		return options{}, fmt.Errorf("actorrt: in-process options are %T, not []actorrt.Option", opts)
	}
	o, err := runtimeOptions(env, given)
	o.starter, o.unlisted = starter, true
	return o, err
}

// inprocClient is a client run in this process: runClient without the
// signals and the exit.
type inprocClient struct{ c *client }

func newInprocClient(starter hostagent.Starter, opts any) (inproc.Client, error) {
	// No dashboard: a test serves no web page.
	env := jobenv.Env{Dashboard: hostsconfig.DashboardOff}
	o, err := inprocOptions(env, starter, opts)
	if err != nil {
		return nil, err
	}
	c, err := newClient(o, env)
	if err != nil {
		return nil, err
	}
	return inprocClient{c}, nil
}

func (ic inprocClient) Context() context.Context { return ic.c.ctx }

func (ic inprocClient) Close() {
	ic.c.shutdown()
	ic.c.finishJobRecord(0, false, nil)
}

// inprocProc is a proc run in this process: runWorker without the
// process. SIGTERM stops it as runWorker does (exit 0); a kill closes its
// bus connection at once, and its end is told at once, as a reaped
// SIGKILL's.
type inprocProc struct {
	w        *worker
	term     chan struct{} // closed by SIGTERM
	termOnce sync.Once
	done     chan struct{} // closed once it ended, as the agent sees it
	doneOnce sync.Once
	gone     chan struct{} // closed once its runtime has wound down

	mu     sync.Mutex
	reason string
	status int
}

var _ inproc.Proc = (*inprocProc)(nil)

func startInprocProc(environ []string, starter hostagent.Starter, opts any) (inproc.Proc, error) {
	env, err := jobenv.FromList(environ)
	if err != nil {
		return nil, err
	}
	if env.Proc == nil {
		return nil, fmt.Errorf("actorrt: an in-process proc needs a proc's variables")
	}
	o, err := inprocOptions(env, starter, opts)
	if err != nil {
		return nil, err
	}
	w, err := newWorker(o, env)
	if err != nil {
		return nil, err
	}
	p := &inprocProc{w: w, term: make(chan struct{}), done: make(chan struct{}), gone: make(chan struct{})}
	go p.run()
	return p, nil
}

// run waits for the proc's end and winds its runtime down, as runWorker.
func (p *inprocProc) run() {
	w := p.w
	select {
	case <-p.term:
		w.exitCode.Store(0)
		w.actors.stopAll(w.endCause("was asked to stop (SIGTERM)"))
		w.cancel()
	case <-w.dispatchEnd:
	}
	<-w.dispatchEnd
	code := int(w.exitCode.Load())
	w.stop()
	if w.hostBus != nil {
		w.hostBus.Close()
	}
	w.logFile.Close()
	p.ended("exited with status "+strconv.Itoa(code), code)
	close(p.gone)
}

// ended records how the proc ended, the first time, and tells its agent.
func (p *inprocProc) ended(reason string, status int) {
	p.doneOnce.Do(func() {
		p.mu.Lock()
		p.reason, p.status = reason, status
		p.mu.Unlock()
		close(p.done)
	})
}

// Pid: it has no process of its own.
func (p *inprocProc) Pid() int { return 0 }

func (p *inprocProc) Done() <-chan struct{} { return p.done }
func (p *inprocProc) Gone() <-chan struct{} { return p.gone }

func (p *inprocProc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal: SIGTERM asks it to stop, SIGKILL kills it; it catches no other.
func (p *inprocProc) Signal(sig os.Signal) {
	switch sig {
	case syscall.SIGTERM:
		p.termOnce.Do(func() { close(p.term) })
	case syscall.SIGKILL:
		p.Kill()
	}
}

// Kill cuts the proc off from the bus at once and tells its end as a
// SIGKILL's; its runtime then winds down as one whose bus is gone.
func (p *inprocProc) Kill() {
	if p.Exited() {
		return
	}
	p.ended("killed by SIGKILL", 128+int(syscall.SIGKILL))
	p.w.link.Close()
}

func (p *inprocProc) End() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reason, p.status
}
