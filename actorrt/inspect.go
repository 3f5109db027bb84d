package actorrt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/wire"
)

// Seeing inside a running job (`monarch stacks`; `monarch profile` is
// profile.go's). Every runtime has a
// second system actor, the inspector, on its proc's subject beside the
// one that runs remote functions, so that a remote function that hangs
// does not hold up the question of where it hangs. The job's client
// serves the job's control socket (internal/jobctl): it asks the
// inspectors of the procs selected, all at once, and answers with what
// came within the request's bound.

// inspectMesh is the id of every proc's inspector.
const inspectMesh = "sys-inspect"

// isSystemMesh reports whether id is one of a proc's system actors, which
// no spawn, restart, reference or MyMesh may name.
func isSystemMesh(id string) bool { return id == sysMesh || id == inspectMesh }

// superviseMethod stands for Supervise in an actor's running endpoint.
var superviseMethod = &method{name: "Supervise"}

// maxGoroutineText bounds the goroutine profile a proc sends.
const maxGoroutineText = 32 << 20

// procStacks is an inspector's answer.
type procStacks struct {
	Goroutines string     `msgpack:"goroutines"`
	Actors     []actorNow `msgpack:"actors"`
}

// actorNow is an actor and the endpoint its mailbox runs ("" idle).
type actorNow struct {
	Actor    string `msgpack:"actor"`
	Endpoint string `msgpack:"endpoint"`
	Since    int64  `msgpack:"since"` // Unix nanoseconds
}

// procInspector is the inspector system actor.
type procInspector struct{}

// Stacks returns the proc's goroutine stacks and what its actors run.
func (procInspector) Stacks(ctx *Context) (procStacks, error) {
	return ctx.actor.mesh.rt.actors.stacks(), nil
}

// stacks is this process's goroutine profile and its actors' endpoints.
func (la *localActors) stacks() procStacks {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	text := withoutSelf(b.String())
	if len(text) > maxGoroutineText {
		cut := strings.LastIndex(text[:maxGoroutineText], "\n\n")
		text = text[:max(cut, 0)] + fmt.Sprintf("\n\n(cut: the profile has %d bytes; %d are sent)\n", b.Len(), maxGoroutineText)
	}
	la.mu.Lock()
	meshes := make([]*localMesh, 0, len(la.meshes))
	for _, lm := range la.meshes {
		if !isSystemMesh(lm.id) {
			meshes = append(meshes, lm)
		}
	}
	la.mu.Unlock()
	var actors []actorNow
	for _, lm := range meshes {
		for _, a := range lm.current() {
			now := actorNow{Actor: a.id}
			if m := a.running.Load(); m != nil {
				now.Endpoint, now.Since = m.name, monoWall(a.since.Load())
			}
			actors = append(actors, now)
		}
	}
	slices.SortFunc(actors, func(x, y actorNow) int { return strings.Compare(x.Actor, y.Actor) })
	return procStacks{Goroutines: text, Actors: actors}
}

// withoutSelf leaves out of a goroutine profile the goroutine that took
// it: the answer to the question, in every proc.
func withoutSelf(text string) string {
	blocks := strings.Split(text, "\n\n")
	out := blocks[:0]
	for _, b := range blocks {
		if !strings.Contains(b, "actorrt.(*localActors).stacks(") {
			out = append(out, b)
		}
	}
	return strings.Join(out, "\n\n")
}

// startInspector makes the proc's inspector, a mesh of one reached on the
// proc's subject.
func (la *localActors) startInspector() error {
	at, err := inspect(reflect.TypeFor[procInspector]())
	if err != nil {
		return err
	}
	if err := applyOptions(at, []RegisterOption{ConcurrentLimit((*procInspector).Profile, 4)}); err != nil {
		return err
	}
	la.startSystemMesh(inspectMesh, "inspect:"+la.rt.procID, at)
	return nil
}

// askStacks asks proc's inspector for its stacks, waiting at most until
// ctx ends.
func (rt *core) askStacks(ctx context.Context, proc string) (procStacks, error) {
	return askInspector[procStacks](ctx, rt, proc, "Stacks")
}

// askInspector calls endpoint method of proc's inspector with args and
// waits for its answer at most until ctx ends.
func askInspector[R any](ctx context.Context, rt *core, proc, method string, args ...any) (R, error) {
	var zero R
	if err := rt.health.goneErr(proc); err != nil {
		return zero, err
	}
	fut := newFuture[ValueMesh[R]](label{mesh: "the " + method + " of proc " + proc})
	id, err := rt.ports.open(newCallPort[R](fut, Extent{}), []string{proc})
	if err != nil {
		return zero, err
	}
	defer rt.ports.close(id)
	h := wire.Header{Kind: wire.KindActor, Target: inspectMesh, Method: method, Port: id, ReplyTo: rt.procID}
	w := wire.NewPayload(&h, rt.link.MaxMessage())
	err = w.Enc.EncodeArrayLen(len(args))
	for _, a := range args {
		if err == nil {
			err = w.Enc.Encode(a)
		}
	}
	if err == nil {
		err = rt.delivery.Send(w, &h, rt.delivery.ToProc(proc))
	}
	w.Free()
	if err != nil {
		return zero, err
	}
	vm, err := fut.Get(ctx)
	if err != nil {
		return zero, err
	}
	return vm.Values()[0], nil
}

// ctlProc is a proc the control socket may ask about.
type ctlProc struct {
	info    procInfo
	host    string
	mesh    string
	rank    int
	command bool
}

// ctlProcs lists the procs of the proc meshes this client started, in
// order of their start and rank.
func (c *client) ctlProcs() []ctlProc {
	c.spawnedMu.Lock()
	pms := slices.Clone(c.spawned)
	c.spawnedMu.Unlock()
	var out []ctlProc
	for _, pm := range pms {
		for r, p := range pm.procs {
			host := c.counts.hostOf(p.ID)
			if host == "" {
				host = p.Host
			}
			out = append(out, ctlProc{info: p, host: host, mesh: pm.name, rank: r, command: pm.command})
		}
	}
	return out
}

// selectProcs picks the procs req asks for; a mesh, rank or host that
// no proc has is an error naming it and what there is.
func selectProcs(all []ctlProc, req jobctl.Selection) ([]ctlProc, error) {
	meshes, hosts := map[string]int{}, map[string]bool{}
	var meshOrder, hostOrder []string
	for _, p := range all {
		if _, ok := meshes[p.mesh]; !ok {
			meshOrder = append(meshOrder, p.mesh)
		}
		meshes[p.mesh] = max(meshes[p.mesh], p.rank+1)
		if !hosts[p.host] {
			hostOrder = append(hostOrder, p.host)
		}
		hosts[p.host] = true
	}
	has := func(what string, names []string) string {
		if len(names) == 0 {
			return "the job has no procs"
		}
		return "the job's " + what + ": " + strings.Join(names, ", ")
	}
	for _, m := range req.Meshes {
		if _, ok := meshes[m]; !ok {
			return nil, fmt.Errorf("no proc mesh %q; %s", m, has("proc meshes", meshOrder))
		}
	}
	for _, h := range req.Hosts {
		if !hosts[h] {
			return nil, fmt.Errorf("no proc of the job on host %q; %s", h, has("hosts", hostOrder))
		}
	}
	inScope := meshOrder
	if len(req.Meshes) > 0 {
		inScope = req.Meshes
	}
	for _, r := range req.Ranks {
		found := false
		var sizes []string
		for _, m := range inScope {
			found = found || r >= 0 && r < meshes[m]
			sizes = append(sizes, fmt.Sprintf("%s has ranks 0-%d", meshName(m), meshes[m]-1))
		}
		if !found {
			if len(sizes) == 0 {
				return nil, fmt.Errorf("no rank %d: the job has no procs", r)
			}
			return nil, fmt.Errorf("no rank %d: %s", r, strings.Join(sizes, ", "))
		}
	}
	var out []ctlProc
	for _, p := range all {
		if (len(req.Meshes) == 0 || slices.Contains(req.Meshes, p.mesh)) &&
			(len(req.Ranks) == 0 || slices.Contains(req.Ranks, p.rank)) &&
			(len(req.Hosts) == 0 || slices.Contains(req.Hosts, p.host)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func meshName(m string) string {
	if m == "" {
		return "the unnamed mesh"
	}
	return "mesh " + m
}

// ctlSelect is the procs s selects, with what the answer says of each;
// with nothing selected the client comes first (its ctlProc is zero).
func (c *client) ctlSelect(s jobctl.Selection) ([]ctlProc, []jobctl.ProcInfo, error) {
	sel, err := selectProcs(c.ctlProcs(), s)
	if err != nil {
		return nil, nil, err
	}
	if s.Empty() {
		sel = append([]ctlProc{{}}, sel...)
	}
	infos := make([]jobctl.ProcInfo, len(sel))
	for i, p := range sel {
		if p.info.ID == "" {
			infos[i] = jobctl.ProcInfo{Proc: c.procID, Host: c.hostLabel, Rank: -1}
		} else {
			infos[i] = jobctl.ProcInfo{Proc: p.info.ID, Host: p.host, Mesh: p.mesh, Rank: p.rank}
		}
	}
	return sel, infos, nil
}

// askEach runs ask for each of procs (the client's too: its info.ID is
// "") at once, but the command procs, which have no runtime of ours to
// give a Go what, and waits for them, at most wait: it sets the Missing
// of infos[i] to why proc i gave nothing (late, when it did not answer
// within wait).
func (c *client) askEach(ctx context.Context, procs []ctlProc, infos []jobctl.ProcInfo, wait time.Duration, what, late string,
	ask func(ctx context.Context, i int, p ctlProc) error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range procs {
		if p.command {
			infos[i].Missing = "a command proc (WithCommand): it runs a command, not this program, so it has no Go " + what + " of monarch's"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ask(ctx, i, p)
			switch {
			case err == nil:
			case ctx.Err() != nil:
				infos[i].Missing = late
			default:
				infos[i].Missing = err.Error()
			}
		}()
	}
	wg.Wait()
}

// ctlStacks answers an OpStacks request on the control socket.
func (c *client) ctlStacks(ctx context.Context, body json.RawMessage) (any, error) {
	var req jobctl.StacksRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("stacks request: %v", err)
	}
	return c.stacks(ctx, req)
}

// stacks asks the procs req selects for their stacks, all at once.
func (c *client) stacks(ctx context.Context, req jobctl.StacksRequest) (*jobctl.StacksAnswer, error) {
	if req.Timeout <= 0 {
		req.Timeout = DefaultStacksTimeout
	}
	sel, infos, err := c.ctlSelect(req.Selection)
	if err != nil {
		return nil, err
	}
	ans := &jobctl.StacksAnswer{Job: c.job, Procs: make([]jobctl.ProcStacks, len(sel))}
	c.askEach(ctx, sel, infos, req.Timeout, "stacks", "no answer within "+req.Timeout.String(), func(ctx context.Context, i int, p ctlProc) error {
		var st procStacks
		var err error
		if p.info.ID == "" {
			st = c.actors.stacks()
		} else if st, err = c.askStacks(ctx, p.info.ID); err != nil {
			return err
		}
		fillStacks(&ans.Procs[i], st)
		return nil
	})
	for i := range ans.Procs {
		ans.Procs[i].ProcInfo = infos[i]
	}
	return ans, nil
}

// DefaultStacksTimeout is how long `monarch stacks` waits for the procs'
// answers unless told.
const DefaultStacksTimeout = 5 * time.Second

func fillStacks(ps *jobctl.ProcStacks, st procStacks) {
	ps.Goroutines = st.Goroutines
	for _, a := range st.Actors {
		as := jobctl.ActorState{Actor: a.Actor, Endpoint: a.Endpoint}
		if a.Endpoint != "" {
			as.Since = time.Unix(0, a.Since)
		}
		ps.Actors = append(ps.Actors, as)
	}
}

// serveControl starts the job's control socket (see internal/jobctl); a
// client that cannot serve it runs on without (it says why in its log).
func (c *client) serveControl(stateDir string) {
	path := jobctl.SocketPath(stateDir, c.job)
	srv, err := jobctl.Listen(path, map[string]jobctl.Op{
		jobctl.OpStacks:    {Handle: c.ctlStacks, Bound: jobctl.StacksBound},
		jobctl.OpProfile:   {Handle: c.ctlProfile, Bound: jobctl.ProfileBound},
		jobctl.OpExec:      {Stream: c.ctlExec, Bound: jobctl.ExecBound},
		jobctl.OpState:     {Handle: c.ctlState, Bound: jobctl.StateBound},
		jobctl.OpWatch:     {Stream: c.ctlWatch, Bound: jobctl.WatchBound},
		jobctl.OpDashboard: {Handle: c.ctlDashboard, Bound: jobctl.DashboardBound},
	})
	if err != nil {
		c.log.Warn().Err(err).Msg("monarch stacks and profile cannot reach this job")
		return
	}
	c.control = srv
}
