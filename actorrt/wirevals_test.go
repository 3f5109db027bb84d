package actorrt_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Every kind of value the SDK hands out travels through an endpoint and
// back, between real procs, and arrives meaning the same thing.

// WireEcho returns what it is given, after the value has been decoded in
// its proc and encoded again.
type WireEcho struct{}

func init() {
	// Registered here, not in registerTestActors, so that this file stands
	// alone; init runs in the client and in every proc alike.
	if err := actorrt.Register[WireEcho](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// WireBundle nests the value types in a struct, slices and maps.
type WireBundle struct {
	P      actorrt.Point
	E      actorrt.Extent
	V      actorrt.ValueMesh[actorrt.Point]
	Ps     []actorrt.Point
	ByName map[string]actorrt.Extent
	Vs     []actorrt.ValueMesh[string]
	PtrP   *actorrt.Point
	Nested actorrt.ValueMesh[actorrt.ValueMesh[int]]
}

func (*WireEcho) Point(ctx *actorrt.Context, p actorrt.Point) (actorrt.Point, error) { return p, nil }
func (*WireEcho) Extent(ctx *actorrt.Context, e actorrt.Extent) (actorrt.Extent, error) {
	return e, nil
}
func (*WireEcho) Ints(ctx *actorrt.Context, v actorrt.ValueMesh[int]) (actorrt.ValueMesh[int], error) {
	return v, nil
}
func (*WireEcho) Bundle(ctx *actorrt.Context, b WireBundle) (WireBundle, error) { return b, nil }
func (*WireEcho) Actors(ctx *actorrt.Context, m *actorrt.ActorMesh[Echo]) (*actorrt.ActorMesh[Echo], error) {
	return m, nil
}
func (*WireEcho) ActorList(ctx *actorrt.Context, ms []*actorrt.ActorMesh[Echo]) ([]*actorrt.ActorMesh[Echo], error) {
	return ms, nil
}
func (*WireEcho) Procs(ctx *actorrt.Context, p map[string]*actorrt.ProcMesh) (map[string]*actorrt.ProcMesh, error) {
	return p, nil
}
func (*WireEcho) Hosts(ctx *actorrt.Context, h *actorrt.HostMesh) (*actorrt.HostMesh, error) {
	return h, nil
}

// Port takes the port second: a Port first would make it an
// explicit-response endpoint.
func (*WireEcho) Port(ctx *actorrt.Context, n int, p actorrt.Port[string]) (actorrt.Port[string], error) {
	return p, nil
}
func (*WireEcho) ActorError(ctx *actorrt.Context, e *actorrt.ActorError) (*actorrt.ActorError, error) {
	return e, nil
}
func (*WireEcho) Failure(ctx *actorrt.Context, f *actorrt.MeshFailure) (*actorrt.MeshFailure, error) {
	return f, nil
}

// Rank is the actor's own rank: a Call gathers a ValueMesh of points.
func (*WireEcho) Rank(ctx *actorrt.Context) (actorrt.Point, error) {
	return ctx.ActorInstance().Rank(), nil
}

// Fail returns the named sentinel, wrapped.
func (*WireEcho) Fail(ctx *actorrt.Context, sentinel string) error {
	for _, s := range wireSentinels {
		if s.Error() == sentinel {
			return fmt.Errorf("echoed: %w", s)
		}
	}
	return fmt.Errorf("no sentinel %q", sentinel)
}

// FailWith returns the given error as its own.
func (*WireEcho) FailWith(ctx *actorrt.Context, e *actorrt.ActorError) error { return e }

// Here is this proc and its host, as meshes others can use.
func (*WireEcho) Here(ctx *actorrt.Context) (*actorrt.ProcMesh, error) {
	return actorrt.ThisProc(ctx), nil
}
func (*WireEcho) Host(ctx *actorrt.Context) (*actorrt.HostMesh, error) {
	return actorrt.ThisHost(ctx), nil
}

var wireSentinels = []error{actorrt.ErrNotStarted, actorrt.ErrBadExtent, actorrt.ErrOutOfRange, actorrt.ErrNotRegistered,
	actorrt.ErrBadEndpoint, actorrt.ErrBadArgs, actorrt.ErrNotOne, actorrt.ErrNameTaken, actorrt.ErrDecode,
	actorrt.ErrPanic, actorrt.ErrStopped, actorrt.ErrActorFailed, actorrt.ErrProcFailed, actorrt.ErrNoHostsConfig, actorrt.ErrBus}

func samePoint(a, b actorrt.Point) bool {
	return a.Extent().Equal(b.Extent()) && slices.Equal(a.Coords(), b.Coords()) && a.String() == b.String()
}

func sameValues[T any](a, b actorrt.ValueMesh[T], eq func(x, y T) bool) bool {
	if !a.Extent().Equal(b.Extent()) || a.Len() != b.Len() {
		return false
	}
	for i, x := range a.Values() {
		if !eq(x, b.Values()[i]) {
			return false
		}
	}
	return true
}

func equal[T comparable](x, y T) bool { return x == y }

func TestWireValuesRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	wires := spawn[WireEcho](t, procs, "wire-echo")
	echo := spawn[Echo](t, procs, "wire-echo-target")
	w := wires.At("hosts", 1).At("gpus", 0) // a member in another proc than the client

	ext := procs.Extent()
	ranks, err := actorrt.Method((*WireEcho).Rank).Call(wires).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range ranks.Items() {
		if !samePoint(p, r) {
			t.Errorf("rank of member %v came back as %v", p, r)
		}
	}
	pids, err := actorrt.Method((*Echo).PID).Call(echo.Slice("gpus", 1, 2)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("points", func(t *testing.T) {
		pt, _ := actorrt.NewPoint(ext, 1, 0)
		for _, p := range []actorrt.Point{pt, ext.Points()[3], {}, actorrt.Extent{}.Points()[0]} {
			got, err := actorrt.Method1((*WireEcho).Point).CallOne(w, p).Get(ctx)
			if err != nil || !samePoint(got, p) || got.Rank() != p.Rank() {
				t.Errorf("point %v came back as %v (%v)", p, got, err)
			}
		}
	})
	t.Run("extents", func(t *testing.T) {
		for _, e := range []actorrt.Extent{ext, {}, echo.Slice("gpus", 1, 2).Extent(), echo.At("hosts", 0).Extent()} {
			got, err := actorrt.Method1((*WireEcho).Extent).CallOne(w, e).Get(ctx)
			if err != nil || !got.Equal(e) || got.NumRanks() != e.NumRanks() {
				t.Errorf("extent %v came back as %v (%v)", e, got, err)
			}
		}
	})
	t.Run("value meshes", func(t *testing.T) {
		for _, v := range []actorrt.ValueMesh[int]{pids, {}} {
			got, err := actorrt.Method1((*WireEcho).Ints).CallOne(w, v).Get(ctx)
			if err != nil || !sameValues(got, v, equal[int]) {
				t.Errorf("value mesh %v came back as %v (%v)", v, got, err)
			}
		}
		// The points of a received mesh are those of its extent.
		got, _ := actorrt.Method1((*WireEcho).Ints).CallOne(w, pids).Get(ctx)
		for p, x := range got.Items() {
			if y, err := pids.At(p); err != nil || x != y {
				t.Errorf("at %v: %d, want %d (%v)", p, x, y, err)
			}
		}
	})
	t.Run("nested in structs, slices and maps", func(t *testing.T) {
		pt := ext.Points()[2]
		words, err := actorrt.Method1((*Echo).Say).Call(echo.At("gpus", 1), "hi").Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := actorrt.Method((*Echo).Ping).Call(echo.At("hosts", 0)).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nested, err := actorrt.Method1((*WireEcho).Ints).Call(wires.At("gpus", 0), inner).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b := WireBundle{
			P: pt, E: ext, V: ranks, Ps: ext.Points(),
			ByName: map[string]actorrt.Extent{"all": ext, "none": {}},
			Vs:     []actorrt.ValueMesh[string]{words, {}},
			PtrP:   &pt,
			Nested: nested,
		}
		got, err := actorrt.Method1((*WireEcho).Bundle).CallOne(w, b).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sameInts := func(x, y actorrt.ValueMesh[int]) bool { return sameValues(x, y, equal[int]) }
		switch {
		case !samePoint(got.P, b.P), !got.E.Equal(b.E), !sameValues(got.V, b.V, samePoint):
			t.Errorf("bundle fields: %v %v %v", got.P, got.E, got.V)
		case len(got.Ps) != len(b.Ps) || !samePoint(got.Ps[3], b.Ps[3]):
			t.Errorf("points %v", got.Ps)
		case len(got.ByName) != 2 || !got.ByName["all"].Equal(ext) || got.ByName["none"].NumRanks() != 1:
			t.Errorf("extents by name %v", got.ByName)
		case len(got.Vs) != 2 || !sameValues(got.Vs[0], words, equal[string]) || got.Vs[1].Len() != 0:
			t.Errorf("value meshes %v", got.Vs)
		case got.PtrP == nil || !samePoint(*got.PtrP, pt):
			t.Errorf("pointer to point %v", got.PtrP)
		case !sameValues(got.Nested, nested, sameInts) || got.Nested.Len() != 2:
			t.Errorf("value mesh of value meshes %v", got.Nested)
		}
	})
	t.Run("actor meshes and their slices", func(t *testing.T) {
		meshes := []*actorrt.ActorMesh[Echo]{echo, echo.Slice("gpus", 1, 2), echo.At("hosts", 1), echo.At("hosts", 0).At("gpus", 1)}
		got, err := actorrt.Method1((*WireEcho).ActorList).CallOne(w, meshes).Get(ctx)
		if err != nil || len(got) != len(meshes) {
			t.Fatalf("mesh list came back as %v (%v)", got, err)
		}
		one, err := actorrt.Method1((*WireEcho).Actors).CallOne(w, meshes[1]).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, one)
		meshes = append(meshes, meshes[1])
		for i, m := range meshes {
			back := got[i]
			if back.Name() != m.Name() || !back.Extent().Equal(m.Extent()) {
				t.Errorf("%v came back as %v", m, back)
				continue
			}
			// Usable: the received reference reaches the same members.
			want, err1 := actorrt.Method((*Echo).Where).Call(m).Get(ctx)
			have, err2 := actorrt.Method((*Echo).Where).Call(back).Get(ctx)
			if err1 != nil || err2 != nil || !sameValues(have, want, equal[string]) {
				t.Errorf("%v: members %v (%v), want %v (%v)", m, have, err2, want, err1)
			}
		}
	})
	t.Run("proc meshes", func(t *testing.T) {
		in := map[string]*actorrt.ProcMesh{"all": procs, "slice": procs.Slice("gpus", 1, 2), "one": procs.At("hosts", 0).At("gpus", 1)}
		got, err := actorrt.Method1((*WireEcho).Procs).CallOne(w, in).Get(ctx)
		if err != nil || len(got) != len(in) {
			t.Fatalf("proc meshes came back as %v (%v)", got, err)
		}
		for k, p := range in {
			if !got[k].Extent().Equal(p.Extent()) {
				t.Errorf("%s: %v came back as %v", k, p, got[k])
			}
		}
		// Usable: actors spawned on the received slice live on its procs.
		m, err := actorrt.Spawn[Echo](ctx, got["slice"], "wire-on-received-procs")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Stop(ctx)
		have, err := actorrt.Method((*Echo).PID).Call(m).Get(ctx)
		if err != nil || !sameValues(have, pids, equal[int]) {
			t.Errorf("actors on the received slice: pids %v (%v), want %v", have, err, pids)
		}
		// And a proc mesh made in a proc (ThisProc there) is usable here.
		here, err := actorrt.Method((*WireEcho).Here).CallOne(w).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := actorrt.Spawn[Echo](ctx, here, "wire-on-a-proc")
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Stop(ctx)
		pid, err1 := actorrt.Method((*Echo).PID).CallOne(m2).Get(ctx)
		wpid, err2 := actorrt.Method((*Echo).PID).CallOne(echo.At("hosts", 1).At("gpus", 0)).Get(ctx)
		if err1 != nil || err2 != nil || pid != wpid {
			t.Errorf("an actor on the proc's own ThisProc runs in pid %d (%v), want %d (%v)", pid, err1, wpid, err2)
		}
	})
	t.Run("host meshes", func(t *testing.T) {
		got, err := actorrt.Method1((*WireEcho).Hosts).CallOne(w, actorrt.ThisHost(ctx)).Get(ctx)
		if err != nil || !got.Extent().Equal(actorrt.ThisHost(ctx).Extent()) {
			t.Fatalf("ThisHost came back as %v (%v)", got, err)
		}
		// Usable: procs started through the received host mesh serve.
		more, err := got.SpawnProcs(ctx, actorrt.Dims{{"extra", 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer more.Stop(ctx)
		m, err := actorrt.Spawn[Echo](ctx, more, "wire-on-received-host")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := actorrt.Method((*Echo).Ping).CallOne(m).Get(ctx); err != nil || v != 1 {
			t.Errorf("actor on a proc of the received host mesh: %v, %v", v, err)
		}
	})
	t.Run("ports", func(t *testing.T) {
		port, recv := actorrt.OpenChannel[string](ctx)
		defer recv.Close()
		got, err := actorrt.Method2((*WireEcho).Port).CallOne(w, 1, port).Get(ctx)
		if err != nil || got.String() != port.String() {
			t.Fatalf("port %v came back as %v (%v)", port, got, err)
		}
		if err := got.Send("through the received port"); err != nil {
			t.Fatal(err)
		}
		if s, err := recv.Recv().Get(ctx); err != nil || s != "through the received port" {
			t.Fatalf("received %q, %v", s, err)
		}
	})
	t.Run("actor errors and failures as values", func(t *testing.T) {
		ae := &actorrt.ActorError{ActorID: "m[3]", Proc: "p-1", Endpoint: "Step", Code: actorrt.CodePanic, Message: "boom", Stack: "goroutine 1"}
		got, err := actorrt.Method1((*WireEcho).ActorError).CallOne(w, ae).Get(ctx)
		if err != nil || !reflect.DeepEqual(got, ae) || !errors.Is(got, actorrt.ErrPanic) {
			t.Errorf("actor error %#v came back as %#v (%v)", ae, got, err)
		}
		mf := &actorrt.MeshFailure{Mesh: "m", MeshID: "c.m1", ActorID: "m[3]", Proc: "p-1", Reason: "its proc ended",
			Dims: ext.Dims(), Coords: []int{1, 1}, Base: 3, Err: ae}
		gotF, err := actorrt.Method1((*WireEcho).Failure).CallOne(w, mf).Get(ctx)
		if err != nil || !reflect.DeepEqual(gotF, mf) || !samePoint(gotF.Rank(), ext.Points()[3]) {
			t.Errorf("failure %#v came back as %#v (%v)", mf, gotF, err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, s := range wireSentinels {
			_, err := actorrt.VoidMethod1((*WireEcho).Fail).CallOne(w, s.Error()).Get(ctx)
			var ae *actorrt.ActorError
			if !errors.Is(err, s) || !errors.As(err, &ae) || ae.Endpoint != "Fail" || !strings.Contains(err.Error(), "echoed: "+s.Error()) {
				t.Errorf("endpoint error wrapping %q came back as %v", s, err)
			}
			for _, other := range wireSentinels {
				if other != s && errors.Is(err, other) {
					t.Errorf("endpoint error wrapping %q matches %q too", s, other)
				}
			}
		}
		// An endpoint that returns an actor's error keeps what it means.
		for _, code := range []string{actorrt.CodePanic, actorrt.CodeDecode, actorrt.CodeNoSuch} {
			inner := &actorrt.ActorError{ActorID: "m[0]", Proc: "p-2", Endpoint: "Step", Code: code, Message: "inner"}
			_, err := actorrt.VoidMethod1((*WireEcho).FailWith).CallOne(w, inner).Get(ctx)
			for sentinel, want := range map[error]bool{actorrt.ErrPanic: code == actorrt.CodePanic, actorrt.ErrDecode: code == actorrt.CodeDecode, actorrt.ErrBadEndpoint: code == actorrt.CodeNoSuch} {
				if errors.Is(err, sentinel) != want {
					t.Errorf("endpoint returning an error of code %q: errors.Is(%v, %v) = %v", code, err, sentinel, !want)
				}
			}
		}
	})
}

// TestSpawnOnStoppedProcs: every spawn onto procs that were stopped fails
// at once with ErrStopped, as calls to them do, instead of waiting out the
// spawn timeout.
func TestSpawnOnStoppedProcs(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 3}})
	w := spawn[WireEcho](t, procs, "wire-stopped")
	host, err := actorrt.Method((*WireEcho).Host).CallOne(w.At("gpus", 2)).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := procs.Slice("gpus", 1, 3).Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Calls to actors on the stopped procs already fail so.
	if _, err := actorrt.Method((*WireEcho).Rank).CallOne(w.At("gpus", 1)).Get(ctx); !errors.Is(err, actorrt.ErrStopped) {
		t.Fatalf("call to an actor on a stopped proc: %v", err)
	}
	quick := func(what string, try func() error) {
		t.Helper()
		start := time.Now()
		err := try()
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s took %v", what, took.Round(time.Second))
		}
		if !errors.Is(err, actorrt.ErrStopped) || !strings.Contains(err.Error(), "stopped") {
			t.Errorf("%s: err = %v, want ErrStopped", what, err)
		}
	}
	quick("Spawn on the stopped slice", func() error {
		_, err := actorrt.Spawn[Echo](ctx, procs.Slice("gpus", 1, 3), "on-stopped")
		return err
	})
	quick("Spawn on a mesh with stopped procs", func() error {
		_, err := actorrt.Spawn[Echo](ctx, procs, "on-partly-stopped")
		return err
	})
	quick("Spawn on a slice of a stopped slice", func() error {
		_, err := actorrt.Spawn[Echo](ctx, procs.Slice("gpus", 1, 3).At("gpus", 1), "on-stopped-one")
		return err
	})
	quick("SpawnPerProc", func() error {
		_, err := actorrt.SpawnPerProc[Echo](ctx, procs.At("gpus", 2), "per-proc-on-stopped", actorrt.Dims{{"workers", 2}})
		return err
	})
	quick("SpawnProcs on a stopped proc's host agent", func() error {
		_, err := host.SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
		return err
	})
	// The proc that was not stopped still takes actors.
	live, err := actorrt.Spawn[Echo](ctx, procs.At("gpus", 0), "on-live")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := actorrt.Method((*Echo).Ping).CallOne(live).Get(ctx); err != nil || v != 1 {
		t.Fatalf("actor on the live proc: %v, %v", v, err)
	}
}

// Types whose values would not arrive as sent, refused at Register.
type (
	Config struct {
		Name string
		inner
	}
	inner struct {
		Level  int
		secret int
	}
	Stamped struct {
		time.Time // lends Stamped its MarshalBinary, which sends the time alone
		Name      string
	}
	LossyStore struct{}
)

func (*LossyStore) Put(ctx *actorrt.Context, c Config) error { return nil }
func (*LossyStore) Get(ctx *actorrt.Context) (struct{ a, b int }, error) {
	return struct{ a, b int }{}, nil
}
func (*LossyStore) Named(ctx *actorrt.Context, v struct {
	Name   string
	secret int
}) error {
	return nil
}
func (*LossyStore) Stamp(ctx *actorrt.Context, s Stamped) error                   { return nil }
func (*LossyStore) Index(ctx *actorrt.Context, m map[*int]string) error           { return nil }
func (*LossyStore) Ask(ctx *actorrt.Context, p actorrt.Port[Config]) error        { return nil }
func (*LossyStore) Means(ctx *actorrt.Context, v actorrt.ValueMesh[Config]) error { return nil }
func (*LossyStore) Chan(ctx *actorrt.Context, n int, ch chan int) error           { return nil }

// Fine takes what travels: a field left out by its tag, pointers, arrays.
func (*LossyStore) Fine(ctx *actorrt.Context, p *[2]WireBundle, s struct {
	Name   string
	secret int `msgpack:"-"`
}) (time.Time, error) {
	return time.Time{}, nil
}

// TestRegisterRefusesLossyTypes: Register refuses every argument and
// result that would arrive changed, all of a type's at once, saying where
// and how to fix it.
func TestRegisterRefusesLossyTypes(t *testing.T) {
	inProcess(t)
	err := actorrt.Register[LossyStore]()
	if !errors.Is(err, actorrt.ErrBadEndpoint) {
		t.Fatalf("err = %v, want ErrBadEndpoint", err)
	}
	want := []string{
		"LossyStore.Ask, result (actorrt_test.Config, sent on its actorrt.Port[github.com/monarch-go/monarch/actorrt_test.Config]): field Config.inner.secret (int) is unexported",
		"LossyStore.Chan, parameter 2 (chan int): a chan cannot be sent in a message",
		"LossyStore.Get, result (struct { a int; b int }): field a (int) is unexported, so it would arrive as its zero value: export it, tag it `msgpack:\"-\"` to leave it out, or make it a named type with a msgpack codec",
		"LossyStore.Get, result (struct { a int; b int }): field b (int) is unexported",
		"LossyStore.Index, parameter 1 (map[*int]string): map key type *int holds pointers",
		"LossyStore.Means, parameter 1 (actorrt.ValueMesh[github.com/monarch-go/monarch/actorrt_test.Config]): field Config.inner.secret (int) is unexported",
		"LossyStore.Named, parameter 1 (struct { Name string; secret int }): field secret (int) is unexported",
		"LossyStore.Put, parameter 1 (actorrt_test.Config): field Config.inner.secret (int) is unexported, so it would arrive as its zero value: export it, tag it `msgpack:\"-\"` to leave it out, or give Config a msgpack codec (EncodeMsgpack and DecodeMsgpack, or RegisterCodec)",
		"LossyStore.Stamp, parameter 1 (actorrt_test.Stamped): actorrt_test.Stamped gets MarshalBinary from its embedded field Time, so msgpack would send that field alone",
	}
	lines := strings.Split(err.Error(), "\n")
	if head := fmt.Sprintf("actorrt: bad endpoint: Register[actorrt_test.LossyStore]: %d problems:", len(want)); lines[0] != head {
		t.Errorf("first line %q, want %q", lines[0], head)
	}
	if len(lines) != len(want)+1 {
		t.Errorf("%d lines, want %d:\n%v", len(lines), len(want)+1, err)
	}
	for i, w := range want {
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "\t"+w) {
			t.Errorf("problem %d: want a line starting %q in\n%v", i+1, w, err)
		}
	}
	if strings.Contains(err.Error(), "Fine") {
		t.Errorf("refused an endpoint whose values travel:\n%v", err)
	}
	// Spawn says why.
	if _, err := actorrt.Spawn[LossyStore](rootCtx(t), actorrt.ThisProc(rootCtx(t)), "lossy"); !errors.Is(err, actorrt.ErrNotRegistered) ||
		!strings.Contains(err.Error(), "Config.inner.secret") {
		t.Errorf("Spawn of a refused type: %v", err)
	}
}
