package actortest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/internal/inproc"
	"github.com/monarch-go/monarch/internal/hostagent"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// goneWait bounds how long Close waits for the runtimes of the cluster's
// procs to wind down once stopped.
const goneWait = 30 * time.Second

// Cluster is a job of simulated hosts whose runtimes all run in this
// process: a client, whose Context the test uses, and the hosts of
// Hosts, on which SpawnProcs starts procs that are runtimes too. Its
// methods are safe for concurrent use.
type Cluster struct {
	client   inproc.Client
	hosts    *actorrt.HostMesh
	failures chan *actorrt.MeshFailure

	mu      sync.Mutex
	procs   map[string]*simProc   // by proc id, while they run and after
	proxies map[string]*linkProxy // of the simulated hosts, by proc id
	// hostIDs are the procs of Hosts by name (h0, h1, ...): the hosts a
	// program starts itself (HostsFromConfig) have these names too.
	hostIDs map[string]string
	started bool // New has started Hosts
	closed  bool
}

// simProc is a proc of the cluster.
type simProc struct {
	id    string
	agent string // the agent that started it
	host  string // for a simulated host: its name (h0, h1, ...)
	p     inproc.Proc
}

// New starts a cluster of hosts simulated hosts: an embedded hub, the
// client, and each host's agent on a leaf of the hub of its own (as
// HostsFromConfig starts them for a "local" hosts file). opts are the
// program's options, as Main's: the client and every proc run with them.
// Unless opts give a fault hook, the failures that reach the client are
// kept for Failures.
func New(hosts int, opts ...actorrt.Option) (*Cluster, error) {
	if hosts < 1 {
		return nil, fmt.Errorf("actortest: %d hosts: want 1 or more", hosts)
	}
	c := &Cluster{failures: make(chan *actorrt.MeshFailure, 4096), procs: map[string]*simProc{}, proxies: map[string]*linkProxy{},
		hostIDs: map[string]string{}}
	all := append([]actorrt.Option{actorrt.WithFaultHook(c.record)}, opts...)
	client, err := inproc.Get().NewClient(starter{c, all}, all)
	if err != nil {
		return nil, fmt.Errorf("actortest: %w", err)
	}
	c.client = client
	hm, err := inproc.Get().Hosts(client.Context(), hosts)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("actortest: start %d hosts: %w", hosts, err)
	}
	c.mu.Lock()
	c.hosts, c.started = hm.(*actorrt.HostMesh), true
	c.mu.Unlock()
	return c, nil
}

// Start is New for a test: it fails t if the cluster cannot start and
// closes the cluster when t ends.
func Start(t testing.TB, hosts int, opts ...actorrt.Option) *Cluster {
	t.Helper()
	c, err := New(hosts, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Context carries the client's runtime, as Main's function's ctx does:
// ThisHost, Lookup, Spawn and the adverbs take it, or one derived from
// it. It ends when the cluster is closed.
func (c *Cluster) Context() context.Context { return c.client.Context() }

// Hosts is the cluster's simulated hosts, {hosts: N}.
func (c *Cluster) Hosts() *actorrt.HostMesh { return c.hosts }

// record is the cluster's fault hook, unless opts gave one.
func (c *Cluster) record(f *actorrt.MeshFailure) error {
	select {
	case c.failures <- f:
		return nil
	default:
		return fmt.Errorf("actortest: %d failures nobody read (Failures); the last: %w", cap(c.failures), f)
	}
}

// Failures gets each failure that reached the client's fault hook (when
// the options gave none): what a program's hook would get.
func (c *Cluster) Failures() <-chan *actorrt.MeshFailure { return c.failures }

// Kill kills every proc of procs (a ProcMesh, or a slice of one) as
// SIGKILL would: each is cut off from the bus at once and its host agent
// tells the job of its end. A slot of the mesh whose proc was replaced
// (a restart started one in its place) is its newest proc, as the mesh
// reaches it. A proc of procs that has ended already, or that this
// cluster did not start, is an error naming it (the others are killed).
func (c *Cluster) Kill(procs *actorrt.ProcMesh) error {
	ids := inproc.Get().ProcIDs(procs)
	if len(ids) == 0 {
		return fmt.Errorf("actortest: Kill: no procs in %v", procs)
	}
	var errs []error
	for _, id := range ids {
		sp := c.recorded(id)
		if sp == nil || sp.p.Exited() {
			errs = append(errs, fmt.Errorf("actortest: Kill: proc %s is not running in this cluster", id))
			continue
		}
		sp.p.Kill()
	}
	return errors.Join(errs...)
}

// LoseHost kills host i: its procs and its agent at once, as SIGKILL
// would, and its bus (the leaf its procs dial) with them.
func (c *Cluster) LoseHost(i int) error {
	host, err := c.host(i)
	if err != nil {
		return err
	}
	c.mu.Lock()
	var on []*simProc
	for _, sp := range c.procs {
		if sp.agent == host.id {
			on = append(on, sp)
		}
	}
	c.mu.Unlock()
	for _, sp := range on {
		sp.p.Kill()
	}
	host.p.Kill()
	return nil
}

// CutHost cuts host i's link to the hub: every connection closed, new
// ones refused, until HealHost. Its leaf keeps dialling meanwhile; a cut
// longer than the link grace (hostagent.LinkGrace) ends the host.
func (c *Cluster) CutHost(i int) error {
	p, err := c.proxy(i)
	if err == nil {
		p.cut()
	}
	return err
}

// HealHost lets host i's leaf link to the hub again.
func (c *Cluster) HealHost(i int) error {
	p, err := c.proxy(i)
	if err == nil {
		p.heal()
	}
	return err
}

// DelayHost holds everything crossing host i's link to the hub, both
// ways (its agent's heartbeats, its procs' messages), for d before it
// passes; 0 ends the delay. What crossed before waits as it was told.
func (c *Cluster) DelayHost(i int, d time.Duration) error {
	p, err := c.proxy(i)
	if err == nil {
		p.delay.Store(int64(d))
	}
	return err
}

// recordWait bounds how long recorded waits for a proc to be recorded.
const recordWait = 10 * time.Second

// recorded is proc id once the cluster has recorded it: a proc's runtime
// serves calls a moment before the starter that started it returns and
// records it, so a proc that has answered may not be recorded yet. nil
// when it is not within recordWait (no proc of this cluster).
func (c *Cluster) recorded(id string) *simProc {
	for end := time.Now().Add(recordWait); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		sp := c.procs[id]
		c.mu.Unlock()
		if sp != nil || time.Now().After(end) {
			return sp
		}
	}
}

// host finds simulated host i.
func (c *Cluster) host(i int) (*simProc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sp := c.procs[c.hostIDs[jobenv.AgentID(i)]]; sp != nil {
		return sp, nil
	}
	return nil, fmt.Errorf("actortest: no host %d (the cluster has hosts 0 to %d)", i, len(c.hostIDs)-1)
}

func (c *Cluster) proxy(i int) (*linkProxy, error) {
	host, err := c.host(i)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxies[host.id], nil
}

// Close stops the procs the client started and the client, then waits
// until every runtime of the cluster has wound down (at most goneWait).
// Idempotent.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.client.Close()
	c.mu.Lock()
	procs := make([]*simProc, 0, len(c.procs))
	for _, sp := range c.procs {
		procs = append(procs, sp)
	}
	c.mu.Unlock()
	// Procs whose agent went first (a lost host's) are stopped here.
	for _, sp := range procs {
		sp.p.Kill()
	}
	deadline := time.NewTimer(goneWait)
	defer deadline.Stop()
	for _, sp := range procs {
		select {
		case <-sp.p.Gone():
		case <-deadline.C:
		}
	}
	c.mu.Lock()
	proxies := c.proxies
	c.proxies = map[string]*linkProxy{}
	c.mu.Unlock()
	for _, p := range proxies {
		p.close()
	}
}

// starter starts the procs of the cluster's agents as runtimes of this
// process, with the program's options.
type starter struct {
	c    *Cluster
	opts []actorrt.Option
}

func (s starter) Start(env []string) (hostagent.Process, error) {
	c := s.c
	e, err := jobenv.FromList(env)
	if err != nil || e.Proc == nil {
		return nil, fmt.Errorf("actortest: a proc's variables: %v", err)
	}
	sp := &simProc{id: e.Proc.ID, agent: e.Proc.Agent}
	if e.HostBus {
		// A simulated host: its leaf dials the hub through a proxy that
		// can cut or delay its link.
		sp.host = e.HostName
		u, err := url.Parse(e.Bus.Leaf)
		if err != nil {
			return nil, fmt.Errorf("actortest: the hub's leaf URL %q: %v", e.Bus.Leaf, err)
		}
		p, err := newLinkProxy(u.Host)
		if err != nil {
			return nil, fmt.Errorf("actortest: %w", err)
		}
		u.Host = p.addr()
		env = append(env, jobenv.Env{Bus: jobenv.Bus{Leaf: u.String()}}.Environ()...)
		c.mu.Lock()
		c.proxies[sp.id] = p
		if !c.started {
			c.hostIDs[sp.host] = sp.id
		}
		c.mu.Unlock()
	}
	ip, err := inproc.Get().StartProc(env, s, s.opts)
	if err != nil {
		return nil, err
	}
	sp.p = ip
	c.mu.Lock()
	c.procs[sp.id] = sp
	c.mu.Unlock()
	return ip, nil
}
