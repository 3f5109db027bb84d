package actorrt

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"reflect"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/monarch-go/monarch/internal/jobview"
	"github.com/monarch-go/monarch/internal/wire"
)

// Seeing inside a running job (`monarch stacks`; `monarch profile` is
// profile.go's). Every runtime has a
// second system actor, the inspector, on its proc's subject beside the
// one that runs remote functions, so that a remote function that hangs
// does not hold up the question of where it hangs. The job's client's
// view (internal/jobview) serves the job's control socket: it asks the
// inspectors of the procs selected, all at once (askInspector), and
// answers with what came within the request's bound.

// inspectMesh is the id of every proc's inspector.
const inspectMesh = "sys-inspect"

// isSystemMesh reports whether id is one of a proc's system actors, which
// no spawn, restart, reference or MyMesh may name.
func isSystemMesh(id string) bool { return id == sysMesh || id == inspectMesh }

// superviseMethod stands for Supervise in an actor's running endpoint.
var superviseMethod = &method{name: "Supervise"}

// maxGoroutineText bounds the goroutine profile a proc sends.
const maxGoroutineText = 32 << 20

// procInspector is the inspector system actor.
type procInspector struct{}

// Stacks returns the proc's goroutine stacks and what its actors run.
func (procInspector) Stacks(ctx *Context) (jobview.Stacks, error) {
	return ctx.actor.mesh.rt.actors.stacks(), nil
}

// stacks is this process's goroutine profile and its actors' endpoints.
func (la *localActors) stacks() jobview.Stacks {
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
	var actors []jobview.ActorNow
	var calls []callNow
	for _, lm := range meshes {
		for _, a := range lm.current() {
			// The call its mailbox runs, then its concurrent calls: an
			// entry for each (an idle actor has one, with no endpoint).
			calls = a.calls.appendRunning(calls[:0])
			if m := a.running.Load(); m != nil {
				calls = append(calls, callNow{m, a.since.Load()})
			}
			if len(calls) == 0 {
				actors = append(actors, jobview.ActorNow{Actor: a.id})
			}
			for _, c := range calls {
				actors = append(actors, jobview.ActorNow{Actor: a.id, Endpoint: c.method.name, Since: monoWall(c.since)})
			}
		}
	}
	// By actor, and an actor's calls oldest first.
	slices.SortFunc(actors, func(x, y jobview.ActorNow) int {
		return cmp.Or(strings.Compare(x.Actor, y.Actor), cmp.Compare(x.Since, y.Since))
	})
	return jobview.Stacks{Goroutines: text, Actors: actors}
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
